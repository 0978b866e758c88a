"""Every run remembered (issue 26): an embedded ClickHouse (chdb) store, or a ClickHouse
server, holding PyTorch's OSS benchmark table oss_ci_benchmark_v3 as upstream defines it;
importers for benchflow reports and the files of the systems benchflow unifies; series
per case and metric, and change points found across runs."""
