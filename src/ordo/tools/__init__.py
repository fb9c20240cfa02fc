"""Operations on stored data: verification (and later reconciliation and cleanup)."""
