"""The metrics endpoint's pure parts: what the metrics process gathered (`gathered`), its
Prometheus text (`exposition`), the dashboard's JSON (`summary`) and page (`page`), and
/proc parsing (`procstat`). No sockets and no files here: shardq/processes/metrics/process.py is
the process that gathers and serves."""

#: The file in the run directory that names the metrics endpoint's address (``HOST:PORT``
#: and a line end), written by the supervisor when it bound it: with port 0, which port.
ADDRESS_FILE = "metrics-address"
