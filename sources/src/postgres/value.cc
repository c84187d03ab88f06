// Placeholder: filled in by the PostgreSQL source work (issue 16).
