"""A tenant app of the per-tenant jobs' tests: its table is made in every tenant's schema."""
