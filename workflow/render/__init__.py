"""Reports people read, rendered from results/report.json (compute once, render many).

One module per format: markdown (coverage table), csv_report (torchao-style CSV),
dashboard (PyTorch OSS benchmark database v3 records), html (one self-contained page).
`common` holds the pure helpers they share (status, sibling lookups, speedups, GEMM
figures), so every format shows the same number for the same case; `brief` the short
forms both reports use (cut cells, unsupported cases grouped, the legend of a stop
reason); `plots` draws the HTML page's figures; `coverage` computes pytorch2.0_ttnn-style
op coverage. Pure functions of a report dict: the stages read and write the files.
Imports only records, measure, models, stats, errors and paths.
"""
