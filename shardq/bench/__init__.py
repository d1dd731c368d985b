"""`shardq bench`: a beanstalk load generator and a two-server comparison runner.

Modules: `hist` (mergeable latency histogram), `workloads` (what each connection sends and
how each reply is checked), `loadgen` (the epoll loop of one Python load process), `core`
(builds and drives the compiled load core, `loadcore.c`, the default engine), `runner`
(spreads a load over processes, progress bar, merged result), `busy` (neighbours that keep
cores busy for the loaded rows), `servers` (start/stop a server command,
CPU and RSS of its process tree from /proc), `procs` (free ports, the listening line, /proc
scanning, stopping processes and process groups: shared with tests/ and tools/), `compare`
(the A/B matrix), `stub` (a server that answers at once and stores nothing: the tool's
ceiling, column L), `limits` (when the tool, not the server, was the limit), `report`
(docs/BENCHMARKS.md) and `png` (a dependency-free bar chart).
"""
