"""Decision reports: one report model, rendered to Markdown and HTML by Jinja, and to PDF by WeasyPrint."""
