"""The example's app: a daily email digest that must go out once per user, not once per replica."""
