"""pairperf's Python tools and the helpers they and the tests share.

  documents     pairperf's JSON documents: read (.json, .jsonl, folders), tell apart by their
                "schema" field, check against their JSON Schema (results/*.schema.json)
  processes     child processes with bounded waits, ended by PID; free ports; waiting for a listener
  netns         network namespaces, veth links and namespace clusters (root)
  report        `pairperf report`: pictures and an index.html (matplotlib)
  compare_peers pairperf against iperf3, sockperf, ucx_perftest, perftest, cudaMemcpy
                (its parts: peer_runners, compare_rows, compare_gpu)
  mesh_scale    `pairperf mesh` timed on namespace clusters, the time model
  validate      results, doctor, mesh, compare, peer and info files against their schemas

The scripts in scripts/ (report, compare-peers, mesh-scale, validate-results) start these; the
installed `pairperf report` finds the package in share/pairperf/python.
"""
