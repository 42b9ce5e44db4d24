"""Graph export/import and DOT rendering."""
