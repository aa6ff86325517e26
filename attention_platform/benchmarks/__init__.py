"""What a user waits for, measured: the grading benchmarks, feedback on submit's latency on a live
hub, and the deadline-rush load test."""
