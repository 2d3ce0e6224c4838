"""The modules under mutation and the test files that cover each one.

Every module under `otelgpu/config/`, `otelgpu/exporters/`, `otelgpu/processors/` and the transport
layers (`otelgpu/confighttp/`, `otelgpu/configgrpc/`, `otelgpu/exporterhelper/`) is a target,
except generated protobuf code (`_proto/`) and modules with nothing to change
(`config/pipeline.py`, a bare dataclass; packages' `__init__.py` that only re-export): see
docs/dev/mutation.md.

Keep each list narrow: every mutant runs these files once (stopping at the first failure), so
a slow file here costs its run time times the module's mutant count.
"""

from __future__ import annotations

CONFIG = "tests/unit/config"
CORE = "tests/unit/core"
CE = "tests/unit/processors/container_env"
K8S = "tests/unit/processors/k8s_attributes"
PROM = "tests/unit/exporters/prometheus"
OTLP = "tests/unit/exporters/otlp"
DEBUG = "tests/unit/exporters/debug"
HPC = ["tests/unit/processors/hpc_jobs/test_hpc_jobs.py"]  # unreadable folders and files too
# The tests of the endpoints' listener, its connections and their send buffers.
HTTP_TESTS = [
    f"{CORE}/test_http_send_buffer.py",  # sizes, unsent bytes, resets, slices: on bare sockets
    f"{CORE}/test_http_listener.py",
    f"{CORE}/test_http_listener_edges.py",  # its thread and loop, default cap, refusals, timers
    f"{CORE}/test_http_attacks.py",  # buffers, write and handshake timeouts, framing
    f"{CORE}/test_http_messages.py",  # an answer's head
    f"{PROM}/test_auth_flood.py",  # the bcrypt queue's limits
    f"{PROM}/test_scrape_thread.py",  # methods, garbage, 431/413, keep-alive, stop
    f"{PROM}/test_endpoint_limits.py",  # the connection cap, idle timeout, auth floods
    f"{PROM}/test_auth_tls.py",  # TLS and the awaited (bcrypt) answers
    f"{CORE}/test_health_and_debug.py",  # the health_check endpoint
]
# The gRPC channel: its arguments, a standard server, hostile and strict peers, and the OTLP
# exporter's calls through it.
GRPC_TESTS = [
    "tests/unit/configgrpc/test_policy.py",  # the channel arguments
    "tests/unit/configgrpc/test_client.py",  # a standard server: answers, errors, TLS, close
    "tests/unit/configgrpc/test_hostile_peers.py",
    f"{OTLP}/test_otlp_grpc.py",
]
CONFIG_STAGES = [  # load, compose, walk, validate: every stage's errors and their positions
    f"{CONFIG}/test_loader.py",
    f"{CONFIG}/test_bad_configs.py",
    f"{CONFIG}/test_good_configs.py",
]
COLLECTOR_HABITS = [f"{CONFIG}/test_collector_habits.py", f"{CONFIG}/test_collector_snippets.py"]
OTLP_CORE = [  # the exporter core over a scripted transport
    f"{OTLP}/test_otlp_exporter.py",
    f"{OTLP}/test_otlp_queue_points.py",
    f"{OTLP}/test_otlp_queue_bytes.py",
    f"{OTLP}/test_otlp_log_caps.py",
    f"{OTLP}/test_otlp_stop_deadline.py",
]
# the OTLP exporter's memory of the series it sent: which ended, when to close them, what a
# delivery failure or a restart does to them; the exporter and the processors that feed it
OTLP_ENDED_TESTS = [
    f"{OTLP}/test_otlp_ended.py",
    f"{OTLP}/test_otlp_ended_steady.py",
    f"{OTLP}/test_otlp_ended_same_sets_as_prometheus.py",
    f"{OTLP}/test_otlp_ended_overdue_after_reload.py",
    f"{OTLP}/test_otlp_ended_delivery.py",
    f"{OTLP}/test_otlp_holder_labels.py",
    f"{OTLP}/test_otlp_resource_identity.py",
    f"{OTLP}/test_otlp_exporter.py",
    "tests/unit/receivers/kubelet_stats/test_one_true_set.py",
    "tests/unit/processors/hpc_jobs/test_hpc_jobs_gone.py",
]
# every factory's type, kind and config; the `components` listing shows each one's description
FACTORIES = [
    f"{CORE}/test_component_and_registry.py",
    f"{CORE}/test_factories.py",  # what each builds, and validate imports no component's core
    f"{CORE}/test_cli.py",
]
PROCESSORS = [f"{CORE}/test_processors.py"]  # attributes, filter, resource and their actions
# the value rules (values.py and the shape, decoding, randomness and plain-value modules it
# composes): every rule is held through `credential_kind` and `plain_refusal`, so each module
# runs the same files, the corpus and the shape tests among them
VALUE_RULES = [
    f"{CE}/test_values.py",
    f"{CE}/test_credential_rules.py",
    f"{CE}/test_value_shapes.py",
    f"{CE}/test_glob_values.py",
    f"{CE}/test_secret_corpus.py",
    f"{CE}/test_value_decoding.py",
    f"{CE}/test_values_boundaries.py",
]
CE_RUNTIMES = [f"{CE}/test_adapters.py", f"{CE}/test_stubs.py", f"{CE}/test_fuzz.py"]
CE_PROCESSOR = [
    f"{CE}/test_processor.py",
    f"{CE}/test_live_matching.py",
    f"{CE}/test_process_attribution.py",
]
K8S_PROCESSOR = [
    f"{K8S}/test_processor.py",
    f"{K8S}/test_unchanged_answer.py",
    f"{K8S}/test_pod_cache.py",
]

Target = tuple[str, list[str]]  # (module path, test files)

CONFIG_TARGETS: dict[str, Target] = {
    "secret_keys": (
        "otelgpu/config/secret_keys.py",
        [f"{CE}/test_keys.py", f"{CE}/test_value_shapes.py"],
    ),
    "composer": (
        "otelgpu/config/composer.py",
        [
            *CONFIG_STAGES,
            f"{CONFIG}/test_composer.py",  # test_good_configs: merge keys, aliases, tags
        ],
    ),
    "config_init": (
        "otelgpu/config/__init__.py",
        [
            f"{CONFIG}/test_collector_habits.py",
            f"{CORE}/test_cli.py",
            f"{CONFIG}/test_loader.py",
        ],
    ),
    "collector_compat": (
        "otelgpu/config/collector_compat.py",
        [
            *COLLECTOR_HABITS,
            f"{CONFIG}/test_collector_keys.py",  # the Collector options we answer
            f"{CONFIG}/test_service_section.py",
            f"{CONFIG}/test_bad_configs.py",  # unknown and contrib-only types
        ],
    ),
    "config_lint": (
        "otelgpu/config/lint.py",
        [
            f"{CONFIG}/test_validate_whole.py",
            f"{CONFIG}/test_collector_keys.py",  # warnings at their positions
            f"{CE}/test_config.py",  # include ["*"] over labels
            f"{OTLP}/test_otlp_tls.py",  # a component's config_warnings (gRPC's TLS range)
            f"{CONFIG}/test_telemetry_readers.py",  # a reader's port against the listeners
        ],
    ),
    "config_loader": (
        "otelgpu/config/loader.py",
        [*CONFIG_STAGES, f"{CONFIG}/test_collector_habits.py"],
    ),
    "config_messages": (
        "otelgpu/config/messages.py",
        [
            *CONFIG_STAGES,
            *COLLECTOR_HABITS,
            f"{CONFIG}/test_value_messages.py",
            f"{CONFIG}/test_collector_keys.py",  # near misses, nested unknown keys
        ],
    ),
    "config_positions": (
        "otelgpu/config/positions.py",
        [f"{CONFIG}/test_positions.py", *CONFIG_STAGES],
    ),
    "config_render": ("otelgpu/config/render.py", [f"{CONFIG}/test_print_config.py"]),
    "config_schema": (
        "otelgpu/config/schema.py",
        [
            *CONFIG_STAGES,
            f"{CONFIG}/test_validate_whole.py",
            *COLLECTOR_HABITS,
            f"{CONFIG}/test_service_section.py",
            f"{CORE}/test_cli.py",  # the unused-component warning
            f"{CONFIG}/test_collector_keys.py",  # where refused Collector options are
        ],
    ),
    "config_service_section": (
        "otelgpu/config/service_section.py",
        [
            f"{CONFIG}/test_service_section.py",  # every Collector-only key, the defaults
            f"{CONFIG}/test_validate_whole.py",
            *COLLECTOR_HABITS,
            f"{CONFIG}/test_telemetry_readers.py",
        ],
    ),
    "config_telemetry_readers": (
        "otelgpu/config/telemetry_readers.py",
        [
            f"{CONFIG}/test_telemetry_readers.py",
            "tests/unit/core/test_telemetry_endpoint.py",
        ],
    ),
    "config_types": (
        "otelgpu/config/types.py",
        [
            f"{CONFIG}/test_types.py",
            *CONFIG_STAGES,
            f"{CONFIG}/test_validate_whole.py",
        ],
    ),
    "config_walker": (
        "otelgpu/config/walker.py",
        CONFIG_STAGES,  # test_loader: merge keys, alias uses and their limit
    ),
}

TRANSPORT_TARGETS: dict[str, Target] = {
    "http_listener": (
        "otelgpu/confighttp/listener.py",
        [*HTTP_TESTS, f"{CORE}/test_process_settings.py"],  # SWITCH_INTERVAL, set by the agent
    ),
    "http_connection": ("otelgpu/confighttp/connection.py", HTTP_TESTS),
    "http_request_parser": ("otelgpu/confighttp/request_parser.py", HTTP_TESTS),
    "http_messages": ("otelgpu/confighttp/messages.py", HTTP_TESTS),
    "http_send_buffer": ("otelgpu/confighttp/send_buffer.py", HTTP_TESTS),
    "http_compression": ("otelgpu/confighttp/compression.py", [f"{CORE}/test_compression.py"]),
    "grpc_client": ("otelgpu/configgrpc/client.py", GRPC_TESTS),
    "grpc_policy": ("otelgpu/configgrpc/policy.py", GRPC_TESTS),
    "queue": (
        "otelgpu/exporterhelper/queue.py",
        [
            "tests/unit/exporterhelper/test_queue.py",  # sizers, packing, capacity 0
            f"{OTLP}/test_otlp_queue_points.py",
            f"{OTLP}/test_otlp_queue_handover.py",  # takes, hand-over, close, clear
        ],
    ),
    "retry": (
        "otelgpu/exporterhelper/retry.py",
        ["tests/unit/exporterhelper/test_retry.py", f"{OTLP}/test_otlp_exporter.py"],
    ),
    "sender": (
        "otelgpu/exporterhelper/sender.py",
        ["tests/unit/exporterhelper/test_retry_sender.py", f"{OTLP}/test_otlp_exporter.py"],
    ),
    "exporterhelper_config": (
        "otelgpu/exporterhelper/config.py",
        [
            "tests/unit/exporterhelper/test_config.py",
            f"{OTLP}/test_otlp_config.py",
            "tests/unit/exporterhelper/test_retry.py",
        ],
    ),
}

EXPORTER_TARGETS: dict[str, Target] = {
    "debug_config": (
        "otelgpu/exporters/debug/config.py",
        [f"{DEBUG}/test_debug_config.py", f"{DEBUG}/test_debug_exporter.py"],
    ),
    "debug_exporter": (
        "otelgpu/exporters/debug/exporter.py",
        [
            f"{DEBUG}/test_debug_exporter.py",
            f"{DEBUG}/test_debug_config.py",
            f"{CORE}/test_health_and_debug.py",
        ],
    ),
    "debug_factory": (
        "otelgpu/exporters/debug/factory.py",
        [*FACTORIES, f"{CORE}/test_health_and_debug.py"],
    ),
    "otlp_config": (
        "otelgpu/exporters/otlp/config.py",
        [
            f"{OTLP}/test_otlp_config.py",
            f"{OTLP}/test_otlp_tls.py",  # the version range gRPC cannot hold, warned at load
            f"{OTLP}/test_otlp_grpc.py",  # endpoints without a scheme
            f"{CONFIG}/test_collector_keys.py",
        ],
    ),
    "otlp_encode": (
        "otelgpu/exporters/otlp/encode.py",
        [
            f"{OTLP}/test_otlp_encode.py",
            f"{OTLP}/test_otlp_wire.py",
            f"{OTLP}/test_otlp_ended.py",
            # the trail the encoder writes for the ended-series memory
            f"{OTLP}/test_otlp_ended_steady.py",
            f"{OTLP}/test_otlp_ended_same_sets_as_prometheus.py",
            f"{OTLP}/test_attribute_cache_memory.py",
            "tests/unit/truth/test_otlp_point_identity.py",
        ],
    ),
    "otlp_ended": ("otelgpu/exporters/otlp/ended/memory.py", OTLP_ENDED_TESTS),
    "otlp_ended_sent": (
        "otelgpu/exporters/otlp/ended/sent.py",
        [*OTLP_ENDED_TESTS],
    ),
    "otlp_ended_steady": (
        "otelgpu/exporters/otlp/ended/steady.py",
        [*OTLP_ENDED_TESTS],
    ),
    "otlp_ended_closing": (
        "otelgpu/exporters/otlp/ended/closing.py",
        [*OTLP_ENDED_TESTS],
    ),
    "otlp_exporter": (
        "otelgpu/exporters/otlp/exporter.py",
        [
            *OTLP_CORE,
            f"{OTLP}/test_otlp_resource_identity.py",
            f"{OTLP}/test_otlp_ended.py",
            f"{OTLP}/test_otlp_ended_delivery.py",
        ],
    ),
    "otlp_factory": (
        "otelgpu/exporters/otlp/factory.py",
        [*FACTORIES, f"{OTLP}/test_otlp_grpc.py", f"{OTLP}/test_otlp_http.py"],
    ),
    "otlp_grpc_client": (
        "otelgpu/exporters/otlp/grpc_client.py",
        [
            f"{OTLP}/test_otlp_grpc.py",
            f"{OTLP}/test_otlp_grpc_proxy.py",
            f"{OTLP}/test_otlp_tls.py",
            f"{OTLP}/test_otlp_transport_errors.py",
        ],
    ),
    "otlp_http_client": (
        "otelgpu/exporters/otlp/http_client.py",
        [
            f"{OTLP}/test_otlp_http.py",
            f"{OTLP}/test_otlp_http_proxy.py",
            f"{OTLP}/test_otlp_tls.py",
            f"{OTLP}/test_otlp_transport_errors.py",
        ],
    ),
    "otlp_resource": (
        "otelgpu/exporters/otlp/resource.py",
        [f"{OTLP}/test_otlp_resource_identity.py", f"{OTLP}/test_otlp_exporter.py"],
    ),
    "otlp_tls": (
        "otelgpu/exporters/otlp/tls.py",
        [f"{OTLP}/test_otlp_tls.py"],
    ),
    # The Prometheus exporter.
    "prom_auth": (
        "otelgpu/exporters/prometheus/auth.py",
        [
            f"{PROM}/test_auth_flood.py",
            f"{PROM}/test_auth_tls.py",
            f"{PROM}/test_endpoint_limits.py",
            f"{PROM}/test_auth_standing.py",
            f"{PROM}/test_server.py",
        ],
    ),
    "prom_config": (
        "otelgpu/exporters/prometheus/config.py",
        [f"{PROM}/test_config.py"],
    ),
    "prom_dcgm": (
        "otelgpu/exporters/prometheus/dcgm.py",
        [
            f"{PROM}/test_dcgm_label_set.py",
            f"{PROM}/test_dcgm.py",
            f"{PROM}/test_dcgm_labels.py",
            f"{PROM}/test_dra_claim_labels.py",
            f"{PROM}/test_dcgm_exporter_expectations.py",  # pod_uid, Hostname
            f"{PROM}/test_per_holder_process_readings.py",  # vgpu
        ],
    ),
    "prom_device_info": (
        "otelgpu/exporters/prometheus/device_info.py",
        [f"{PROM}/test_device_info.py"],
    ),
    "prom_dcgm_xid": ("otelgpu/exporters/prometheus/dcgm_xid.py", [f"{PROM}/test_dcgm_labels.py"]),
    "prom_exporter": (
        "otelgpu/exporters/prometheus/exporter.py",
        [
            f"{PROM}/test_exporter.py",
            f"{PROM}/test_reload_handover.py",
            f"{PROM}/test_scrape_thread.py",
            f"{PROM}/test_config.py",
            f"{PROM}/test_label_hygiene.py",  # values cut to the limit, counted
        ],
    ),
    "prom_general": (
        "otelgpu/exporters/prometheus/general.py",
        [
            f"{PROM}/test_translate.py",  # no points, a name another type holds
            f"{PROM}/test_replay.py",
            f"{PROM}/test_identity.py",
            f"{PROM}/test_dcgm_nvlink.py",
        ],
    ),
    "prom_factory": (
        "otelgpu/exporters/prometheus/factory.py",
        [*FACTORIES, f"{PROM}/test_config.py", f"{PROM}/test_exporter.py"],
    ),
    "labels": (
        "otelgpu/exporters/prometheus/labels.py",
        [
            f"{PROM}/test_labels.py",
            f"{PROM}/test_label_hygiene.py",
            f"{PROM}/test_dcgm_labels.py",  # dcgm naming's derived labels (MIG device, err_msg)
            f"{PROM}/test_identity.py",  # the line cache's generations (`rotate`, `len`)
        ],
    ),
    "prom_naming": (
        "otelgpu/exporters/prometheus/naming.py",
        [f"{PROM}/test_naming.py"],
    ),
    "openmetrics": (
        "otelgpu/exporters/prometheus/openmetrics.py",
        [
            f"{PROM}/test_openmetrics.py",
            f"{PROM}/test_negotiation.py",
            f"{PROM}/test_render.py",  # a drained render's chunks let go
        ],
    ),
    "render": (
        "otelgpu/exporters/prometheus/render.py",
        [f"{PROM}/test_render.py"],
    ),
    "replay": (
        "otelgpu/exporters/prometheus/replay.py",
        # test_replay holds the replay equal to the general path; test_identity: the set rules
        [
            f"{PROM}/test_replay.py",
            f"{PROM}/test_identity.py",
            f"{PROM}/test_dcgm_nvlink.py",
        ],
    ),
    "prom_series": (
        "otelgpu/exporters/prometheus/series.py",
        [
            f"{PROM}/test_series_store.py",  # owners, losses, replacement, expiry
            f"{PROM}/test_identity.py",
            f"{PROM}/test_labels.py",
            f"{PROM}/test_render.py",
        ],
    ),
    "prom_server": (
        "otelgpu/exporters/prometheus/server.py",
        [
            f"{PROM}/test_scrape_thread.py",
            f"{PROM}/test_negotiation.py",
            f"{PROM}/test_server.py",
            f"{PROM}/test_auth_flood.py",
            f"{PROM}/test_endpoint_limits.py",
            f"{PROM}/test_reload_handover.py",
        ],
    ),
    "prom_targets": (
        "otelgpu/exporters/prometheus/targets.py",
        [
            f"{PROM}/test_targets.py",
            f"{PROM}/test_replay.py",
            f"{PROM}/test_dcgm_nvlink.py",  # the NVLink total in both namings
            f"{PROM}/test_dcgm_text.py",  # a dcgm family's HELP
            f"{PROM}/test_dcgm_exporter_expectations.py",
            f"{PROM}/test_dcgm_labels.py",  # the XID gauge's latest code
        ],
    ),
    "prom_value_text": (
        "otelgpu/exporters/prometheus/value_text.py",
        [
            f"{PROM}/test_value_text.py",  # fast and direct: first
            f"{PROM}/test_replay.py",
            f"{PROM}/test_render.py",
            f"{PROM}/test_dcgm.py",
            f"{PROM}/test_dcgm_text.py",  # dcgm's integers and doubles as it prints them
        ],
    ),
    "prom_identities": (
        "otelgpu/exporters/prometheus/identities.py",
        [
            f"{PROM}/test_identity.py",
            f"{PROM}/test_replay.py",
        ],
    ),
    "prom_translate": (
        "otelgpu/exporters/prometheus/translate.py",
        [
            f"{PROM}/test_translate.py",  # counts, emptied identities, replay by default
            f"{PROM}/test_identity.py",
            f"{PROM}/test_labels.py",
            f"{PROM}/test_dcgm.py",
            f"{PROM}/test_replay.py",  # the replay's branches of `ingest`
            f"{PROM}/test_dra_claim_labels.py",
            f"{PROM}/test_dcgm_labels.py",
            "tests/unit/receivers/nvml/test_dcgm_device_set.py",  # MIG parents left out
            f"{PROM}/test_dcgm_exporter_expectations.py",
        ],
    ),
}

PROCESSOR_TARGETS: dict[str, Target] = {
    "actions": ("otelgpu/processors/actions.py", PROCESSORS),
    "attributes_factory": ("otelgpu/processors/attributes/factory.py", [*FACTORIES, *PROCESSORS]),
    "filter_config": (
        "otelgpu/processors/filter/config.py",
        [
            "tests/unit/processors/test_filter_config.py",
            *PROCESSORS,
            f"{CONFIG}/test_collector_snippets.py",
        ],
    ),
    "filter_factory": ("otelgpu/processors/filter/factory.py", [*FACTORIES, *PROCESSORS]),
    "resource_factory": ("otelgpu/processors/resource/factory.py", [*FACTORIES, *PROCESSORS]),
    # container_env
    "ce_audit": (
        "otelgpu/processors/container_env/audit.py",
        [
            f"{CE}/test_audit.py",
            f"{CE}/test_glob_values.py",
            f"{CE}/test_snapshot.py",  # the containers gauge it sets
        ],
    ),
    "ce_config": (
        "otelgpu/processors/container_env/config.py",
        [f"{CE}/test_config.py"],
    ),
    "ce_containerd": (
        "otelgpu/processors/container_env/containerd.py",
        [
            *CE_RUNTIMES,
            f"{CE}/test_containerd_memory.py",
            "tests/integration/test_container_env_containerd.py",  # the real containerd
        ],
    ),
    "ce_docker": (
        "otelgpu/processors/container_env/docker.py",
        [
            *CE_RUNTIMES,
            "tests/integration/test_container_env_docker.py",  # a real dockerd
        ],
    ),
    "ce_factory": (
        "otelgpu/processors/container_env/factory.py",
        [*FACTORIES, f"{CE}/test_config.py"],
    ),
    "ce_keys": (
        "otelgpu/processors/container_env/keys.py",
        [
            f"{CE}/test_keys.py",
            f"{CE}/test_keys_boundaries.py",  # the check span, the length cap, glob characters
            f"{CE}/test_records.py",  # each section's refusals counted under it
            f"{CE}/test_audit.py",
            f"{CE}/test_secret_properties.py",
        ],
    ),
    "ce_listing_history": (
        "otelgpu/processors/container_env/listing_history.py",
        [
            f"{CE}/test_listing_history.py",  # each check's bounds, what is remembered
            f"{CE}/test_stale_holder.py",  # the stale-holder checks through the processor
            f"{CE}/test_processor.py",
        ],
    ),
    "ce_owners": (
        "otelgpu/processors/container_env/owners.py",
        [f"{CE}/test_owners.py"],
    ),
    "ce_processor": (
        "otelgpu/processors/container_env/processor.py",
        [
            *CE_PROCESSOR,
            f"{CE}/test_outside_allocation_lean.py",
            f"{CE}/test_stale_holder.py",  # holder_stale, by reason
        ],
    ),
    "ce_records": (
        "otelgpu/processors/container_env/records.py",
        [f"{CE}/test_records.py", f"{CE}/test_source.py", f"{CE}/test_snapshot.py"],
    ),
    "ce_runtime": ("otelgpu/processors/container_env/runtime.py", CE_RUNTIMES),
    "ce_snapshot": (
        "otelgpu/processors/container_env/snapshot.py",
        [
            f"{CE}/test_snapshot.py",
            f"{CE}/test_processor.py",
            f"{CE}/test_live_matching.py",
            f"{CE}/test_listing_history.py",
        ],
    ),
    "ce_source": (
        "otelgpu/processors/container_env/source.py",
        [
            f"{CE}/test_source.py",
            f"{CE}/test_processor.py",
            f"{CE}/test_snapshot.py",
        ],
    ),
    "values": (
        "otelgpu/processors/container_env/values.py",
        [
            f"{CE}/test_values.py",
            f"{CE}/test_value_shapes.py",  # secrets behind escapes among the shapes
            f"{CE}/test_credential_rules.py",
            f"{CE}/test_glob_values.py",
            f"{CE}/test_value_decoding.py",  # layers, readings, inflated bytes
            f"{CE}/test_values_boundaries.py",  # random stretches and entropy bars, both sides
        ],
    ),
    "secret_values": (  # the same module, against the corpus and shape tests too
        "otelgpu/processors/container_env/values.py",
        VALUE_RULES,
    ),
    "ce_value_shapes": ("otelgpu/processors/container_env/value_shapes.py", VALUE_RULES),
    "ce_value_decoding": ("otelgpu/processors/container_env/value_decoding.py", VALUE_RULES),
    "ce_value_randomness": (
        "otelgpu/processors/container_env/value_randomness.py",
        VALUE_RULES,
    ),
    "ce_glob_values": ("otelgpu/processors/container_env/glob_values.py", VALUE_RULES),
    "ce_tokens": (  # the published token formats
        "otelgpu/processors/container_env/tokens.py",
        [
            f"{CE}/test_credential_rules.py",
            f"{CE}/test_values.py",
            f"{CE}/test_value_shapes.py",
            f"{CE}/test_secret_corpus.py",
        ],
    ),
    # hpc_jobs
    "hpc_config": (
        "otelgpu/processors/hpc_jobs/config.py",
        ["tests/unit/processors/hpc_jobs/test_hpc_config.py", *HPC],
    ),
    "hpc_factory": ("otelgpu/processors/hpc_jobs/factory.py", [*FACTORIES, *HPC]),
    "hpc_job_files": ("otelgpu/processors/hpc_jobs/job_files.py", HPC),
    "hpc_processor": (
        "otelgpu/processors/hpc_jobs/processor.py",
        [*HPC, "tests/unit/processors/hpc_jobs/test_hpc_jobs_gone.py"],  # duplicate's markers
    ),
    # k8s_attributes
    "k8s_allocations": (
        "otelgpu/processors/k8s_attributes/allocations.py",
        [f"{K8S}/test_allocations.py", *K8S_PROCESSOR, f"{K8S}/test_dra.py"],
    ),
    "k8s_config": (
        "otelgpu/processors/k8s_attributes/config.py",
        [
            f"{K8S}/test_config.py",
            f"{CONFIG}/test_collector_habits.py",
            f"{K8S}/test_processor.py",  # node_name's environment variable
        ],
    ),
    "devices": (
        "otelgpu/processors/k8s_attributes/devices.py",
        # test_dra: the DRA device-name rules that live in this module too
        [f"{K8S}/test_devices.py", f"{K8S}/test_dra.py", f"{K8S}/test_fuzz.py"],
    ),
    "k8s_dra_report": (
        "otelgpu/processors/k8s_attributes/dra_report.py",
        [
            f"{K8S}/test_dra_warnings.py",  # what each warning says
            f"{K8S}/test_dra.py",  # counts by reason
            f"{K8S}/test_dra_claims.py",
        ],
    ),
    "k8s_factory": (
        "otelgpu/processors/k8s_attributes/factory.py",
        [*FACTORIES, f"{K8S}/test_config.py", f"{K8S}/test_processor.py"],
    ),
    "k8s_holder_times": (
        "otelgpu/processors/k8s_attributes/holder_times.py",
        [  # the notes' times: since when each holder and each holder's pod are listed
            f"{K8S}/test_holder_times.py",
            f"{K8S}/test_stale_kubelet.py",
            f"{K8S}/test_allocation_since.py",
            f"{K8S}/test_allocations.py",
            f"{K8S}/test_processor.py",
        ],
    ),
    "k8s_pod_resources": (
        "otelgpu/processors/k8s_attributes/pod_resources.py",
        [
            f"{K8S}/test_wire.py",
            f"{K8S}/test_pod_resources_allocatable.py",
            *K8S_PROCESSOR,
            "tests/integration/test_pod_resources.py",  # the kubelet stand-in on grpcio
            f"{K8S}/test_dra.py",
            f"{K8S}/test_snapshot.py",
            f"{K8S}/test_refresher.py",
            f"{K8S}/test_stale_kubelet.py",
        ],
    ),
    "k8s_processor": (
        "otelgpu/processors/k8s_attributes/processor.py",
        [
            f"{K8S}/test_kubelet_answers.py",  # large answers, ID forms, unknown devices
            f"{K8S}/test_notes_and_reasons.py",  # notes for container_env, unmatched reasons
            f"{K8S}/test_allocation_ends.py",  # the marker that empties a device's series
            f"{K8S}/test_dra_warnings.py",
            *K8S_PROCESSOR,
            f"{K8S}/test_dra.py",
            f"{K8S}/test_start_and_shutdown.py",  # one waits out a silent kubelet (about 1 s)
        ],
    ),
    "k8s_refresher": (
        "otelgpu/processors/k8s_attributes/refresher.py",
        [*K8S_PROCESSOR, f"{K8S}/test_refresher.py"],
    ),
    "snapshot": (
        "otelgpu/processors/k8s_attributes/snapshot.py",
        [
            f"{K8S}/test_snapshot.py",
            f"{K8S}/test_dra.py",  # DRA claims in the snapshot
            f"{K8S}/test_order_independence.py",  # the same pods in any order
            f"{K8S}/test_dra_claims.py",
            f"{K8S}/test_allocations.py",
            f"{K8S}/test_kubelet_answers.py",
            f"{K8S}/test_holder_times.py",
        ],
    ),
    "k8s_wire": (
        "otelgpu/processors/k8s_attributes/wire.py",
        [f"{K8S}/test_wire.py", f"{K8S}/test_pod_cache.py", f"{K8S}/test_order_independence.py"],
    ),
}

OTHER_TARGETS: dict[str, Target] = {
    "cpu_limit": (
        "otelgpu/service/cpu_limit.py",
        [f"{CORE}/test_cpu_limit.py"],
    ),
    "telemetry": (
        "otelgpu/component/telemetry.py",
        [
            f"{CORE}/test_telemetry_golden.py",
            f"{CORE}/test_telemetry_table.py",
            f"{CORE}/test_health_and_debug.py",  # a source's state changes, logged once each
            f"{CORE}/test_telemetry_sources.py",  # served down until it answers; readiness
        ],
    ),
}

TARGETS: dict[str, Target] = {
    **CONFIG_TARGETS,
    **TRANSPORT_TARGETS,
    **EXPORTER_TARGETS,
    **PROCESSOR_TARGETS,
    **OTHER_TARGETS,
}
