"""Reports people read, rendered from results/report.json (compute once, render many).

One module per format: markdown (coverage table), csv_report (torchao-style CSV),
dashboard (PyTorch OSS benchmark database v3 records), html (one self-contained page).
`common` holds the pure helpers they share (status, sibling lookups, speedups, GEMM
figures), so every format shows the same number for the same case; `peak` measures the
machine's matmul peak that percent-of-peak figures are relative to; `plots` draws the
HTML page's figures; `files` is what the render rules call (read, render, write).
"""
