"""The executor, Session, fetches."""
