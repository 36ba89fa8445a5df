// The table of every Manta tunable: MANTA_CONFIG(type, name, default, doc).
// Each entry can be overridden by the environment variable MANTA_<name> or, at
// `manta start --head`, by --system-config '{"name": value}'. Included by config.h
// with MANTA_CONFIG defined; do not include it directly. Units are in the names.

// ---- GCS
MANTA_CONFIG(int64_t, health_check_period_ms, 1000, "GCS health-checks each raylet this often")
MANTA_CONFIG(int64_t, health_check_timeout_ms, 1000, "deadline of one health check")
MANTA_CONFIG(int64_t, health_check_failure_threshold, 5, "consecutive misses before a node is DEAD")
MANTA_CONFIG(int64_t, health_check_initial_delay_ms, 1000, "grace period after registration")
MANTA_CONFIG(int64_t, gcs_pubsub_poll_timeout_ms, 30000, "a long poll with nothing to say returns empty after this")
MANTA_CONFIG(int64_t, gcs_pubsub_subscriber_timeout_ms, 60000, "a subscriber that has not polled for this long is dropped")
MANTA_CONFIG(int64_t, gcs_pubsub_max_queued_messages, 100000, "per-subscriber queue cap; oldest dropped beyond it")
MANTA_CONFIG(int64_t, redis_connect_timeout_ms, 3000, "connecting to Redis")
MANTA_CONFIG(int64_t, redis_command_timeout_ms, 5000, "one Redis command")
MANTA_CONFIG(int64_t, redis_retry_attempts, 5, "reconnect attempts for one Redis command before it fails")

// ---- raylet
MANTA_CONFIG(int64_t, gcs_rpc_server_reconnect_timeout_s, 60, "raylet exits after the GCS is unreachable this long")
MANTA_CONFIG(int64_t, resource_report_ms, 100, "raylet reports changed availability at most this often")
MANTA_CONFIG(int64_t, raylet_gcs_check_period_ms, 1000, "raylet checks that the GCS answers this often")

// ---- gRPC plumbing
MANTA_CONFIG(int64_t, grpc_client_deadline_ms, 10000, "default deadline of one RPC attempt")
MANTA_CONFIG(int64_t, grpc_client_max_attempts, 5, "attempts of an idempotent RPC (1 = no retry)")
MANTA_CONFIG(int64_t, grpc_client_initial_backoff_ms, 50, "first retry backoff; doubles each attempt")
MANTA_CONFIG(int64_t, grpc_client_max_backoff_ms, 2000, "retry backoff cap")
MANTA_CONFIG(int64_t, grpc_max_message_bytes, 512 * 1024 * 1024, "largest RPC message accepted or sent")
MANTA_CONFIG(std::string, testing_rpc_failure, "", "fault injection: 'Method=drop_request|drop_reply|delay:MS[@PROB],...'")
MANTA_CONFIG(int64_t, slow_handler_warn_ms, 100, "event-loop handlers slower than this are logged")

// ---- object store
MANTA_CONFIG(int64_t, object_store_full_timeout_ms, 10000, "a Create that cannot get memory fails after this")
MANTA_CONFIG(int64_t, object_spilling_min_bytes, 100 * 1024 * 1024, "spill at least this much per batch (one file)")
MANTA_CONFIG(int64_t, object_spilling_threads, 2, "threads writing and reading spill files")
MANTA_CONFIG(std::string, object_spilling_dir, "", "spill directory (default: <session dir>/spill)")
MANTA_CONFIG(int64_t, object_store_prefault_bytes, -1, "bytes of the arena to pre-fault at start, at idle priority (-1 = all, 0 = none)")
MANTA_CONFIG(int64_t, object_chunk_bytes, 4 * 1024 * 1024, "node-to-node transfer chunk size")
MANTA_CONFIG(int64_t, object_manager_max_bytes_in_flight, 256 * 1024 * 1024, "per-node cap on bytes being pulled")
MANTA_CONFIG(int64_t, object_manager_pull_timeout_ms, 30000, "one pull attempt from one location")
