"""What benchflow writes and reads back: versioned records, defined by their JSON schemas.

The case record's builders over workflow/schemas/report.schema.json and its one
assembler (`case`), stage results (`stage`), the report
(`report`) and its provenance (`provenance`), Forge-style results files
(`results_file`), atomic storage (`storage`), a content-addressed file store
(`blobs`: the goldens' artifacts, the export cache) and JSON schema loading. Imports only
models, stats, errors and paths.
"""
