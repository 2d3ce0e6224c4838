"""The modules under mutation and the test files that cover each one.

Keep each list narrow: every mutant runs these files once (stopping at the first failure), so
a slow file here costs its run time times the module's mutant count.
"""

from __future__ import annotations

CE = "tests/unit/processors/container_env"
K8S = "tests/unit/processors/k8s_attributes"
PROM = "tests/unit/exporters/prometheus"
OTLP = "tests/unit/exporters/otlp"
# The tests of the endpoints' listener, its connections and their send buffers.
HTTP_TESTS = [
    "tests/unit/core/test_http_listener.py",
    "tests/unit/core/test_http_listener_edges.py",  # written from the first run's survivors
    "tests/unit/core/test_http_attacks.py",  # buffers, write and handshake timeouts, framing
    f"{PROM}/test_auth_flood.py",  # the bcrypt queue's limits
    f"{PROM}/test_scrape_thread.py",  # methods, garbage, 431/413, keep-alive, stop
    f"{PROM}/test_endpoint_limits.py",  # the connection cap, idle timeout, auth floods
    f"{PROM}/test_auth_tls.py",  # TLS and the awaited (bcrypt) answers
    "tests/unit/core/test_health_and_debug.py",  # the health_check endpoint
]

TARGETS: dict[str, tuple[str, list[str]]] = {
    # short name: (module path, test files)
    "secret_keys": (
        "otelgpu/config/secret_keys.py",
        [f"{CE}/test_keys.py", f"{CE}/test_secret_keys_mutants.py"],
    ),
    "values": (
        "otelgpu/processors/container_env/values.py",
        [f"{CE}/test_values.py", f"{CE}/test_values_mutants.py"],
    ),
    "render": (
        "otelgpu/exporters/prometheus/render.py",
        [f"{PROM}/test_render.py", f"{PROM}/test_render_mutants.py"],
    ),
    "replay": (
        "otelgpu/exporters/prometheus/replay.py",
        # test_replay holds the replay equal to the general path; test_identity: the set rules
        [f"{PROM}/test_replay.py", f"{PROM}/test_identity.py"],
    ),
    "labels": (
        "otelgpu/exporters/prometheus/labels.py",
        [
            f"{PROM}/test_labels.py",
            f"{PROM}/test_label_hygiene.py",
            f"{PROM}/test_labels_mutants.py",
            f"{PROM}/test_dcgm_labels.py",  # dcgm naming's derived labels (MIG device, err_msg)
        ],
    ),
    "queue": (
        "otelgpu/exporterhelper/queue.py",
        [
            f"{OTLP}/test_otlp_queue_points.py",
            f"{OTLP}/test_otlp_queue_handover.py",
            f"{OTLP}/test_otlp_queue_mutants.py",
        ],
    ),
    "devices": (
        "otelgpu/processors/k8s_attributes/devices.py",
        # test_dra: the DRA device-name rules that live in this module too
        [f"{K8S}/test_devices.py", f"{K8S}/test_devices_mutants.py", f"{K8S}/test_dra.py"],
    ),
    "snapshot": (
        "otelgpu/processors/k8s_attributes/snapshot.py",
        [
            f"{K8S}/test_snapshot.py",
            f"{K8S}/test_snapshot_mutants.py",
            f"{K8S}/test_dra.py",  # DRA claims in the snapshot
            f"{K8S}/test_order_independence.py",  # the same pods in any order
        ],
    ),
    "http_listener": ("otelgpu/confighttp/listener.py", HTTP_TESTS),
    "http_connection": ("otelgpu/confighttp/connection.py", HTTP_TESTS),
    "http_send_buffer": ("otelgpu/confighttp/send_buffer.py", HTTP_TESTS),
    "cpu_limit": ("otelgpu/service/cpu_limit.py", ["tests/unit/core/test_cpu_limit.py"]),
    "grpc_client": ("otelgpu/configgrpc/client.py", ["tests/unit/configgrpc"]),
    "grpc_policy": ("otelgpu/configgrpc/policy.py", ["tests/unit/configgrpc"]),
    "secret_values": (
        "otelgpu/processors/container_env/values.py",
        [
            "tests/unit/processors/container_env/test_value_shapes.py",
            "tests/unit/processors/container_env/test_glob_values.py",
            "tests/unit/processors/container_env/test_secret_corpus.py",
        ],
    ),
    "openmetrics": (
        "otelgpu/exporters/prometheus/openmetrics.py",
        [f"{PROM}/test_openmetrics.py", f"{PROM}/test_negotiation.py"],
    ),
    "composer": (
        "otelgpu/config/composer.py",
        [
            "tests/unit/config/test_loader.py",
            "tests/unit/config/test_good_configs.py",  # merge keys, aliases, explicit tags
            "tests/unit/config/test_bad_configs.py",
            "tests/unit/config/test_composer_mutants.py",
        ],
    ),
}
