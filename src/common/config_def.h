// The table of every Manta tunable: MANTA_CONFIG(type, name, default, doc).
// Each entry can be overridden by the environment variable MANTA_<name> or, at
// `manta start --head`, by --system-config '{"name": value}'. Included by config.h
// with MANTA_CONFIG defined; do not include it directly. Units are in the names.

// ---- GCS
MANTA_CONFIG(int64_t, health_check_period_ms, 1000, "GCS health-checks each raylet this often")
MANTA_CONFIG(int64_t, bundle_return_attempts, 5, "tries of the GCS to give a placement group's bundle back to its raylet")
MANTA_CONFIG(int64_t, bundle_return_retry_ms, 500, "pause between those tries")
MANTA_CONFIG(int64_t, health_check_timeout_ms, 1000, "deadline of one health check")
MANTA_CONFIG(int64_t, health_check_failure_threshold, 5, "consecutive misses before a node is DEAD")
MANTA_CONFIG(int64_t, health_check_initial_delay_ms, 1000, "grace period after registration")
MANTA_CONFIG(int64_t, health_check_isolation_grace_ms, 60000,
             "when no node on another host answers (the GCS is likely cut off), none is declared dead until this long after its first miss")
MANTA_CONFIG(int64_t, gcs_pubsub_poll_timeout_ms, 30000, "a long poll with nothing to say returns empty after this")
MANTA_CONFIG(int64_t, gcs_pubsub_subscriber_timeout_ms, 60000, "a subscriber that has not polled for this long is dropped")
MANTA_CONFIG(int64_t, gcs_max_subscribers, 100000, "pubsub subscribers the GCS keeps at once; more are refused")
MANTA_CONFIG(int64_t, gcs_max_kv_value_bytes, 16 * 1024 * 1024, "largest value InternalKVPut accepts")
MANTA_CONFIG(int64_t, gcs_pubsub_max_queued_messages, 100000, "per-subscriber queue cap; oldest dropped beyond it")
MANTA_CONFIG(int64_t, gcs_pubsub_tick_ms, 1000,
             "how often the GCS answers long polls that timed out and drops subscribers gone silent")
MANTA_CONFIG(int64_t, gcs_pubsub_batch_ms, 100,
             "a subscriber gets nodes' resource reports at most this often, the newest of each node (0: each at once)")
MANTA_CONFIG(int64_t, gcs_pubsub_max_batched_answers_per_s, 2000,
             "answers a second that carry resource reports, all subscribers together (0: no bound); beyond "
             "gcs_pubsub_batch_ms x this many nodes, each node gets them less often")
MANTA_CONFIG(int64_t, redis_connect_timeout_ms, 3000, "connecting to Redis")
MANTA_CONFIG(int64_t, redis_command_timeout_ms, 5000, "one Redis command")
MANTA_CONFIG(int64_t, redis_retry_attempts, 5, "reconnect attempts for one Redis command before it fails")

// ---- raylet
MANTA_CONFIG(int64_t, gcs_rpc_server_reconnect_timeout_s, 60, "raylet exits after the GCS is unreachable this long")
MANTA_CONFIG(int64_t, resource_report_ms, 100, "raylet reports changed availability at most this often")
MANTA_CONFIG(int64_t, raylet_gcs_check_period_ms, 1000, "raylet checks that the GCS answers this often")
MANTA_CONFIG(int64_t, raylet_stop_timeout_ms, 3000, "a stopping raylet waits this long for its RPCs to finish")
MANTA_CONFIG(int64_t, raylet_unregister_timeout_ms, 2000,
             "a raylet stopped by a signal waits this long for the GCS to take its node off before it stops anyway")
MANTA_CONFIG(int64_t, object_store_pager_tick_ms, 1000,
             "how often the raylet looks at which pages of the object store to fault in ahead or give back")
MANTA_CONFIG(int64_t, object_store_create_check_ms, 50,
             "how often the object store fails creates that waited object_store_full_timeout_ms for memory")
MANTA_CONFIG(int64_t, raylet_malloc_mmap_threshold_bytes, 32 * 1024 * 1024,
             "raylet heap blocks from this size are mmapped (object chunks below it are reused from the heap)")
MANTA_CONFIG(int64_t, raylet_malloc_trim_threshold_bytes, 256 * 1024 * 1024,
             "free heap the raylet keeps before giving memory back to the system")

// ---- gRPC plumbing
MANTA_CONFIG(int64_t, grpc_client_deadline_ms, 10000, "default deadline of one RPC attempt")
MANTA_CONFIG(int64_t, grpc_client_max_attempts, 5, "attempts of an idempotent RPC (1 = no retry)")
MANTA_CONFIG(int64_t, grpc_client_initial_backoff_ms, 50, "first retry backoff; doubles each attempt")
MANTA_CONFIG(int64_t, grpc_client_max_backoff_ms, 2000, "retry backoff cap")
MANTA_CONFIG(int64_t, grpc_max_message_bytes, 64 * 1024 * 1024,
             "largest RPC message or task channel frame accepted or sent (object chunks are at most half of it)")
MANTA_CONFIG(int64_t, grpc_keepalive_time_ms, 5000, "gRPC channels ping their server this often while calls are in flight")
MANTA_CONFIG(int64_t, grpc_keepalive_timeout_ms, 5000, "a ping not answered this long gives the connection up")
MANTA_CONFIG(int64_t, accept_pause_ms, 100, "a listening socket out of file descriptors stops accepting this long")
MANTA_CONFIG(int64_t, unproven_connection_timeout_ms, 10000,
             "a connection that has not proven it holds the cluster token this long is shut down")
MANTA_CONFIG(int64_t, max_unproven_connections_per_host, 64,
             "connections not yet past the token check a listening socket lets in from one remote host")
MANTA_CONFIG(int64_t, max_unproven_connections, 1024,
             "connections not yet past the token check a worker's task channel lets in from all hosts together")
MANTA_CONFIG(std::string, cluster_tls, "auto",
             "TLS between the cluster's processes: 'auto' (on when the head binds an address other than loopback), 'on' or 'off' (plaintext: the token and all data cross the network readable). Without --tls-* files the head makes a CA of its own and members get certificates by proving the token")
MANTA_CONFIG(int64_t, tls_certificate_lifetime_s, 365 * 24 * 3600, "certificates from the cluster's own CA are valid this long (the CA itself ten years)")
MANTA_CONFIG(int64_t, enrollment_timeout_ms, 5000, "getting a certificate from the GCS (proving the token, receiving it) must finish within this")
MANTA_CONFIG(int64_t, task_channel_keepalive_idle_ms, 10000,
             "a task channel idle this long sends TCP keepalive probes (whole seconds; a peer whose host vanished "
             "is noticed after idle + probes x interval)")
MANTA_CONFIG(int64_t, task_channel_keepalive_interval_ms, 3000, "between a task channel's unanswered keepalive probes (whole seconds)")
MANTA_CONFIG(int64_t, task_channel_keepalive_probes, 3, "unanswered keepalive probes after which a task channel is given up")
MANTA_CONFIG(std::string, testing_rpc_failure, "", "fault injection: 'Method=drop_request|drop_reply|delay:MS[@PROB],...'")
MANTA_CONFIG(int64_t, slow_handler_warn_ms, 100, "event-loop handlers slower than this are logged")

// ---- object store
MANTA_CONFIG(int64_t, object_store_full_timeout_ms, 10000, "a Create that cannot get memory fails after this")
MANTA_CONFIG(double, memory_usage_threshold, 0.95,
             "the raylet kills a worker when its node's memory use (its memory cgroup's, when that has a limit) passes this fraction")
MANTA_CONFIG(int64_t, memory_monitor_refresh_ms, 250, "how often the raylet checks its node's memory use; 0 = never")
MANTA_CONFIG(int64_t, object_spilling_min_bytes, 100 * 1024 * 1024, "spill at least this much per batch (one file)")
MANTA_CONFIG(int64_t, object_spilling_threads, 2, "threads writing and reading spill files")
MANTA_CONFIG(int64_t, object_store_max_pending_connects, 64,
             "store clients that have connected but not yet sent Connect, at once; more are refused")
MANTA_CONFIG(std::string, object_spilling_dir, "", "spill directory (default: <session dir>/spill)")
MANTA_CONFIG(int64_t, object_store_prefault_bytes, 64 << 20, "bytes of the arena kept populated ahead of the highest object from the first object on, at idle priority (-1 = the whole arena at start, 0 = none)")
MANTA_CONFIG(int64_t, object_store_release_idle_ms, 10000, "populated pages of the arena beyond what the prefault window needs are given back after this long (0 = never)")
MANTA_CONFIG(int64_t, object_chunk_bytes, 4 * 1024 * 1024, "node-to-node transfer chunk size")
MANTA_CONFIG(int64_t, object_manager_max_bytes_in_flight, 256 * 1024 * 1024, "per-node cap on bytes being pulled")
MANTA_CONFIG(int64_t, object_manager_pull_timeout_ms, 30000, "one pull attempt from one location")
MANTA_CONFIG(bool, object_data_channel, true,
             "objects move between nodes over a TCP channel of their own: one copy without TLS, sealed (AES-256-GCM) with it (false: over gRPC streaming)")
MANTA_CONFIG(int64_t, object_transfer_threads, 4, "threads per raylet pulling over the object data channel")
MANTA_CONFIG(int64_t, object_manager_connect_timeout_ms, 3000, "connecting to another node's object data channel")
MANTA_CONFIG(int64_t, object_data_channel_handshake_timeout_ms, 5000, "a connection to a node's object data channel must prove the token within this, however slowly its bytes come")
MANTA_CONFIG(int64_t, object_data_channel_max_unproven_per_host, 8, "object data channel connections still proving the token from one host (loopback included)")
MANTA_CONFIG(int64_t, object_data_channel_max_unproven, 32, "object data channel connections still proving the token from all hosts together")
MANTA_CONFIG(int64_t, object_transfer_min_bytes_per_s, 16 * 1024 * 1024, "a transfer over the object data channel is given up when it cannot finish within the pull timeout plus its size at this rate")

// ---- workers, leases and scheduling (raylet)
MANTA_CONFIG(double, scheduler_spread_threshold, 0.5, "hybrid policy: prefer the local node while its utilisation is below this")
MANTA_CONFIG(double, scheduler_top_k_fraction, 0.2, "hybrid policy: pick among this fraction (at least 1) of least-utilised nodes")
MANTA_CONFIG(int64_t, worker_register_timeout_ms, 30000, "a started worker that has not registered by then is killed")
MANTA_CONFIG(int64_t, idle_worker_killing_time_ms, 60000, "an idle worker beyond the pool's soft limit exits after this")
MANTA_CONFIG(int64_t, worker_maximum_startup_concurrency, 0, "workers starting at once per node (0 = number of CPUs)")
MANTA_CONFIG(int64_t, num_workers_soft_limit, -1, "idle workers kept per node (-1 = number of CPUs)")
MANTA_CONFIG(int64_t, driver_liveness_check_ms, 1000, "raylet checks that local drivers and lease owners are alive this often")
MANTA_CONFIG(int64_t, worker_exit_grace_ms, 5000, "a worker asked to exit (idle, or its job ended) that is still alive after this is killed with SIGKILL")

// ---- jobs (`manta job`, the dashboard's Jobs API)
MANTA_CONFIG(int64_t, job_working_dir_max_bytes, int64_t{100} << 20,
             "a job's uploaded working directory holds at most this many bytes of files")
MANTA_CONFIG(int64_t, job_working_dir_max_files, 10000, "and at most this many files")

// ---- core worker (drivers and workers)
MANTA_CONFIG(int64_t, free_memory_check_ms, 250,
             "how often a core worker looks whether a burst of freed objects is over (to give the heap back)")
MANTA_CONFIG(int64_t, free_memory_min_frees, 100000, "freed objects that make a burst worth giving heap memory back for")
MANTA_CONFIG(int64_t, worker_malloc_mmap_threshold_bytes, 32 * 1024 * 1024,
             "worker heap blocks from this size are mmapped (smaller ones are reused from the heap by the next task)")
MANTA_CONFIG(int64_t, worker_malloc_trim_threshold_bytes, 256 * 1024 * 1024,
             "free heap a busy worker keeps for its next tasks before giving memory back to the system")
MANTA_CONFIG(int64_t, worker_idle_trim_ms, 1000,
             "a worker that ran tasks and then none for this long gives its free heap back (0 = never)")
MANTA_CONFIG(int64_t, raylet_watch_ms, 500, "how often a core worker checks that its node's raylet is still there")
MANTA_CONFIG(int64_t, lease_retry_delay_ms, 100, "an owner asks again this long after a lease request failed")
MANTA_CONFIG(int64_t, max_consecutive_lease_failures, 10,
             "lease requests of one scheduling key that fail in a row before its queued tasks fail")
MANTA_CONFIG(int64_t, task_pipeline_target_us, 10000,
             "work an owner keeps queued at each leased worker, in the tasks' measured run time (µs)")
MANTA_CONFIG(int64_t, task_steal_after_ms, 50,
             "an owner takes back the tasks queued at a worker that has answered nothing for this long, to run "
             "them elsewhere (0 = never)")
MANTA_CONFIG(int64_t, placement_group_wait_slice_ms, 60000,
             "a placement group wait asks the GCS for at most this long at a time (a silent GCS is asked again)")
MANTA_CONFIG(int64_t, placement_group_wait_retry_ms, 200,
             "a placement group wait asks again this long after the GCS failed to answer")
MANTA_CONFIG(int64_t, actor_state_retry_ms, 1000,
             "a core worker that could not read an actor's state from the GCS asks again this long after")
MANTA_CONFIG(int64_t, object_recovery_rounds, 3,
             "a Get whose copy of an object is lost has it rebuilt and reads it again up to this many times")
MANTA_CONFIG(int64_t, task_reply_batch_ms, 1,
             "a worker running a batch of pushed tasks sends the finished ones' results at least this often")
MANTA_CONFIG(int64_t, actor_exit_timeout_ms, 10000,
             "a threaded actor leaving (ray::ExitActor, exit) waits this long for its running calls to finish")
MANTA_CONFIG(int64_t, max_inline_arg_bytes, 100 * 1024, "task arguments up to this size travel inside the task spec")
MANTA_CONFIG(int64_t, max_inline_result_bytes, 100 * 1024, "task results up to this size travel inside the reply")
MANTA_CONFIG(int64_t, max_direct_put_bytes, 100 * 1024, "Put values up to this size stay in the owner's memory store")
MANTA_CONFIG(int64_t, max_tasks_in_flight_per_worker, 1000, "tasks pushed to one leased worker before its replies come back")
MANTA_CONFIG(int64_t, max_tasks_per_push, 1000, "tasks sent together in one push over a task channel")
MANTA_CONFIG(std::string, task_channel_protection, "auto",
             "task channel frames: 'encrypt' (AES-256-GCM), 'mac' (authenticated, in the clear), 'auto' (encrypt with TLS, else mac) or 'none' (trusted networks only); a worker's must be at least its owners'")
MANTA_CONFIG(int64_t, task_channel_spin_us, 200, "a worker waiting for tasks, or a thread in Get/Wait waiting for task results, busy-polls its task channels this long (µs) before it sleeps; 0 = never")
MANTA_CONFIG(int64_t, worker_lease_idle_ms, 10, "an owner returns a leased worker after this long without work (its key has nothing queued)")
MANTA_CONFIG(int64_t, placement_group_split_wait_ms, 1000, "a PACK (SPREAD) group that fits now on more (fewer) nodes than once resources in use come back waits up to this long for them before it is placed as it fits")
MANTA_CONFIG(int64_t, max_pending_lease_requests_per_key, 10, "lease requests in flight per scheduling key")
MANTA_CONFIG(int64_t, max_lineage_bytes, int64_t{1} << 30, "an owner keeps finished tasks' specs (to rebuild lost objects) up to this many bytes; beyond it the oldest are dropped")
MANTA_CONFIG(int64_t, task_max_retries, 3, "default retries of a task whose worker or node died")
MANTA_CONFIG(int64_t, raylet_lease_timeout_ms, 0, "deadline of one lease request (0 = none: infeasible requests wait)")
MANTA_CONFIG(bool, task_events_enabled, true, "core workers record their task attempts' states and report them to the GCS (manta list tasks, timeline)")
MANTA_CONFIG(int64_t, task_events_report_ms, 1000, "a core worker reports its task events to the GCS this often (and at exit)")
MANTA_CONFIG(int64_t, task_events_max_buffer_rows, 200000, "task attempts a core worker keeps between two reports; beyond them new attempts' events are dropped and counted")
MANTA_CONFIG(int64_t, task_events_early_report_rows, 20000, "a core worker reports its task events before the next tick once this many ended attempts were written as rows since its last report (or its buffer is half full)")
MANTA_CONFIG(int64_t, task_events_max_detailed_per_s, 2000, "short finished task attempts a core worker reports in detail per second (0: all); beyond them it reports only how many finished, per function, and a sample spread over time stays detailed")
MANTA_CONFIG(int64_t, task_events_max_num, 100000, "task attempts the GCS keeps; beyond them finished and failed attempts go first, then the oldest")
MANTA_CONFIG(int64_t, task_events_max_bytes, int64_t{64} << 20, "bytes of task attempts the GCS keeps, evicted like task_events_max_num")
MANTA_CONFIG(int64_t, log_to_driver_period_ms, 100, "a raylet passes what its workers printed on to their drivers this often (0 = never)")
MANTA_CONFIG(int64_t, log_to_driver_max_bytes, int64_t{1} << 20, "a raylet passes on at most this many bytes of its workers' output per round")
MANTA_CONFIG(int64_t, log_to_driver_flush_timeout_ms, 1000, "a driver that shows its workers' output waits at most this long, as it shuts down, for the lines they printed before (0 = not at all)")
MANTA_CONFIG(int64_t, state_api_call_timeout_ms, 5000, "the GCS waits this long for each raylet or owner it asks for workers and objects (manta list workers/objects, manta memory)")
MANTA_CONFIG(int64_t, metrics_report_period_ms, 1000, "a core worker sends its user metrics (ray::Gauge, ...) to its raylet this often (and at exit)")
MANTA_CONFIG(int64_t, metrics_max_series_per_metric, 1000, "distinct tag sets a metric keeps; records of further ones are dropped and counted")
