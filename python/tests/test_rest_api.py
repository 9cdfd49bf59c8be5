"""Contract tests of the REST admin API against a real manager.

Each test checks status code, content type, exact fields and their order, and
the error paths, as shared/seeds/rest-admin-api.zh.txt defines them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time

import pytest
import requests

import tierkv
from conftest import Manager

JSON_TYPE = "application/json; charset=utf-8"
TEXT_TYPE = "text/plain; charset=utf-8"


def get_json(url: str, method: str = "GET", **kw) -> dict:
    r = requests.request(method, url, timeout=10, **kw)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == JSON_TYPE
    return r.json()


def assert_error(r: requests.Response, fragment: str, status: int = 200) -> None:
    assert r.status_code == status, r.text
    assert r.headers["Content-Type"] == JSON_TYPE
    body = r.json()
    assert list(body) == ["success", "error_message", "timestamp"]
    assert body["success"] is False
    assert fragment in body["error_message"], body["error_message"]
    assert abs(body["timestamp"] - time.time() * 1000) < 60_000  # a real time, not 0


def summary(url: str) -> dict[str, str]:
    r = requests.get(f"{url}/metrics/summary", timeout=10)
    assert r.headers["Content-Type"] == TEXT_TYPE
    assert "\n" not in r.text.strip()
    return dict(kv.split("=", 1) for kv in r.text.split())


@pytest.fixture(scope="module")
def api():
    data_dir = tempfile.mkdtemp(prefix="tierkv-rest-")
    m = Manager("--data-dir", data_dir, "--rank", "2")
    c = tierkv.Client(m.uds, rank=3)
    yield m, c
    c.close()
    m.close()
    shutil.rmtree(data_dir, ignore_errors=True)


def test_health_role_ha_status_leader(api):
    m, _ = api
    body = get_json(f"{m.rest}/health")
    assert list(body) == ["status", "role", "ha_state", "service_ready", "leader_address",
                          "view_version"]
    assert body == {"status": "ok", "role": "leader", "ha_state": "serving",
                    "service_ready": True, "leader_address": "unknown", "view_version": 0}
    for path, text in (("/role", "leader"), ("/ha_status", "serving")):
        r = requests.get(m.rest + path, timeout=10)
        assert r.headers["Content-Type"] == TEXT_TYPE and r.text == text
    leader = get_json(f"{m.rest}/leader")
    assert list(leader) == ["present", "leader_address", "view_version"]
    assert leader == {"present": True, "leader_address": "unknown", "view_version": 0}


def test_metadata_raw_bytes_and_errors(api):
    m, _ = api
    url = f"{m.rest}/metadata"
    raw = "line1\nline2 ünïcode {not json".encode()
    r = requests.put(url, params={"key": "cfg/a"}, data=raw, timeout=10)
    assert r.status_code == 200 and r.headers["Content-Type"] == TEXT_TYPE
    assert r.text == "metadata updated"
    r = requests.get(url, params={"key": "cfg/a"}, timeout=10)
    assert r.content == raw and r.headers["Content-Type"] == TEXT_TYPE
    r = requests.delete(url, params={"key": "cfg/a"}, timeout=10)
    assert r.text == "metadata deleted"
    assert_error(requests.get(url, params={"key": "cfg/a"}, timeout=10), "not found")
    assert_error(requests.delete(url, params={"key": "cfg/a"}, timeout=10), "not found")
    assert_error(requests.get(url, timeout=10), "missing query parameter 'key'")


def test_metadata_survives_a_restart():
    data_dir = tempfile.mkdtemp(prefix="tierkv-meta-")
    try:
        m = Manager("--data-dir", data_dir)
        requests.put(f"{m.rest}/metadata", params={"key": "k"}, data=b"\x00\x01kept", timeout=10)
        assert m.stop() == 0
        m.start()
        assert requests.get(f"{m.rest}/metadata", params={"key": "k"},
                            timeout=10).content == b"\x00\x01kept"
        m.close()
        m = Manager("--data-dir", data_dir)  # also after kill -9 (the file is replaced atomically)
        m.close()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def test_query_key_and_batch_query_keys(api):
    m, c = api
    c.put("qk/a", b"x" * 100)
    body = get_json(f"{m.rest}/query_key", params={"key": "qk/a"})
    assert list(body) == ["key", "size", "prot", "numBlobs", "valid", "blobs"]
    assert body["key"] == "qk/a" and body["size"] == 100 and body["valid"] is True
    assert body["numBlobs"] == 1
    (blob,) = body["blobs"]
    assert list(blob) == ["rank", "medium", "gva", "state", "leaseTimeoutTtlMs"]
    assert blob["rank"] == 2 and blob["medium"] == "DRAM"
    assert_error(requests.get(f"{m.rest}/query_key", params={"key": "qk/none"}, timeout=10),
                 "not found")
    body = get_json(f"{m.rest}/batch_query_keys", params={"keys": "qk/a,qk/none"})
    assert list(body) == ["success", "data"] and body["success"] is True
    assert [d["key"] for d in body["data"]] == ["qk/a", "qk/none"]
    missing = body["data"][1]
    assert missing == {"key": "qk/none", "size": 0, "prot": 0, "numBlobs": 0, "valid": False,
                       "blobs": []}
    assert_error(requests.get(f"{m.rest}/batch_query_keys", timeout=10), "'keys'")


def test_delete_key_get_all_keys_delete_all(api):
    m, c = api
    c.put("dk/1", b"1")
    c.put("dk/2", b"2")
    r = requests.get(f"{m.rest}/get_all_keys", timeout=10)
    assert r.headers["Content-Type"] == TEXT_TYPE
    assert {"dk/1", "dk/2"} <= set(r.text.splitlines())
    body = get_json(f"{m.rest}/key", "DELETE", params={"key": "dk/1"})
    assert body == {"success": True, "message": "key deleted"} and list(body) == ["success", "message"]
    assert not c.exists("dk/1")
    assert_error(requests.delete(f"{m.rest}/key", params={"key": "dk/1"}, timeout=10), "not found")
    c.put("x", b"other tenant", tenant="t2")
    body = get_json(f"{m.rest}/all_keys", "DELETE")
    assert body == {"success": True, "message": "all keys deleted"}
    assert c.list_keys() == [] and c.list_keys(tenant="t2") == []
    assert requests.get(f"{m.rest}/get_all_keys", timeout=10).text == ""


def test_segments_and_capacity(api):
    m, c = api
    r = requests.get(f"{m.rest}/get_all_segments", timeout=10)
    assert r.headers["Content-Type"] == TEXT_TYPE and r.text.splitlines() == ["rank-2-dram"]
    c.put("cap/a", b"x" * 10000)
    body = get_json(f"{m.rest}/query_segment", params={"segment": "rank-2-dram"})
    assert list(body) == ["segment", "medium", "total_bytes", "used_bytes", "remaining_bytes",
                          "remaining_ratio"]
    assert body["medium"] == "DRAM" and body["total_bytes"] == 128 << 20
    assert body["used_bytes"] >= 10000
    assert body["remaining_bytes"] == body["total_bytes"] - body["used_bytes"]
    assert 0 <= body["remaining_ratio"] <= 1
    assert_error(requests.get(f"{m.rest}/query_segment", params={"segment": "rank-9-hbm"},
                              timeout=10), "unknown segment")
    st = get_json(f"{m.rest}/api/v1/segments/status", params={"segment": "rank-2-dram"})
    assert st == {"success": True, "segment": "rank-2-dram", "status": 1, "status_name": "OK"}
    assert list(st) == ["success", "segment", "status", "status_name"]
    assert_error(requests.get(f"{m.rest}/api/v1/segments/status", params={"segment": "nope"},
                              timeout=10), "unknown segment")
    usage = get_json(f"{m.rest}/api/v1/capacity/usage")
    assert list(usage) == ["timestamp", "data_source_ready", "degraded", "npu", "cpu"]
    assert usage["npu"] == {"total_bytes": 0, "used_bytes": 0, "free_bytes": 0, "usage_ratio": 0}
    assert list(usage["cpu"]) == ["total_bytes", "used_bytes", "free_bytes", "usage_ratio"]
    assert usage["cpu"]["total_bytes"] == 128 << 20 and usage["cpu"]["used_bytes"] >= 10000
    rem = get_json(f"{m.rest}/api/v1/capacity/segment_remaining")
    assert list(rem) == ["timestamp", "data_source_ready", "degraded", "segments"]
    (seg,) = rem["segments"]
    assert list(seg) == ["segment_name", "medium", "total_bytes", "used_bytes",
                         "remaining_bytes", "remaining_ratio"]
    assert seg["segment_name"] == "rank-2-dram"


def test_drain_jobs_are_not_supported(api):
    m, _ = api
    assert_error(requests.post(f"{m.rest}/api/v1/drain_jobs", data=b"", timeout=10),
                 "Not supported")
    assert_error(requests.get(f"{m.rest}/api/v1/drain_jobs/query", params={"job_id": "j"},
                              timeout=10), "Not supported")
    assert_error(requests.post(f"{m.rest}/api/v1/drain_jobs/cancel", params={"job_id": "j"},
                               data=b"", timeout=10), "Not supported")


def test_unknown_paths_and_methods(api):
    m, _ = api
    assert_error(requests.get(f"{m.rest}/no/such/path", timeout=10), "unknown path", 404)
    assert_error(requests.delete(f"{m.rest}/health", timeout=10), "not allowed", 405)
    assert_error(requests.get(f"{m.rest}/memory/evict", timeout=10), "use POST", 405)


def test_memory_evict_and_prefetch(api):
    m, c = api
    for k in ("ev/1", "ev/2", "ev/3"):
        c.put(k, b"v")
    body = get_json(f"{m.rest}/memory/evict", "POST", json={"chunk_hashes": ["ev/1", "nope"]})
    assert body == {"status": "success", "num_evicted": 1} and list(body) == ["status", "num_evicted"]
    body = get_json(f"{m.rest}/memory/evict", "POST",
                    json={"chunk_hashes": ["ev/2"], "locations": ["LocalCPUBackend"]})
    assert body["num_evicted"] == 1
    deadline = time.time() + 5
    while (c.exists("ev/1") or c.exists("ev/2")) and time.time() < deadline:
        time.sleep(0.02)  # the work runs after the answer
    assert not c.exists("ev/1") and not c.exists("ev/2") and c.exists("ev/3")
    assert_error(requests.post(f"{m.rest}/memory/evict", json={"x": 1}, timeout=10),
                 "missing chunk_hashes")
    assert_error(requests.post(f"{m.rest}/memory/evict", data=b"{nope", timeout=10),
                 "invalid JSON body")
    # Found by fuzzing: an out-of-range number once escaped as an internal error.
    assert_error(requests.post(f"{m.rest}/memory/evict", data=b"6e6666", timeout=10),
                 "invalid JSON body")
    assert_error(requests.post(f"{m.rest}/memory/evict", json={"chunk_hashes": "ev/3"},
                               timeout=10), "array")
    body = get_json(f"{m.rest}/memory/prefetch", "POST",
                    json={"chunk_hashes": ["ev/3"], "lookup_id": "req_001"})
    assert list(body) == ["status", "lookup_id", "num_chunks"]
    assert body["status"] == "prefetch_started" and body["lookup_id"] == "req_001"
    assert get_json(f"{m.rest}/memory/prefetch", "POST",
                    json={"chunk_hashes": ["ev/3"]})["lookup_id"] == ""
    assert_error(requests.post(f"{m.rest}/memory/prefetch", json={}, timeout=10),
                 "missing chunk_hashes")


def test_counting_rules(api):
    m, c = api
    before = summary(m.rest)
    c.put("cnt/a", b"1")
    with pytest.raises(tierkv.Duplicated):
        c.put("cnt/a", b"2")            # a real failure
    assert c.get("cnt/missing") is None  # not_found, not a failure
    assert c.batch_get(["cnt/a", "cnt/missing"]) == [b"1", None]  # batch not_found
    with pytest.raises(tierkv.InvalidArgument):
        c.batch_get(["cnt/a", ""])       # batch failure beats not_found
    after = summary(m.rest)
    d = {k: int(after[k]) - int(before[k]) for k in after if after[k].isdigit()}
    assert d["alloc_req"] == 2 and d["alloc_success"] == 1 and d["alloc_fail"] == 1
    assert d["update_state_req"] == 1 and d["update_state_success"] == 1
    # get: 1 miss + batch items (hit, miss) + (hit, invalid)
    assert d["get_req"] == 5 and d["get_success"] == 2
    assert d["get_not_found"] == 2 and d["get_fail"] == 1
    assert d["batch_get_req"] == 2 and d["batch_get_not_found"] == 1 and d["batch_get_fail"] == 1
    assert d["batch_get_success"] == 0
    for op in ("alloc", "get", "batch_get", "query", "remove", "exist_key"):
        assert int(after[f"{op}_req"]) == int(after[f"{op}_success"]) + int(
            after[f"{op}_fail"]) + int(after.get(f"{op}_not_found", 0))


def test_summary_field_order(api):
    m, _ = api
    keys = list(summary(m.rest))
    head = ["keys", "evict", "rewarm", "rewarm_fail", "rewarm_bytes_total",
            "rewarm_bytes_current", "flush_blobs", "flush_bytes", "get_hit_dram", "get_hit_ssd",
            "hbm_used", "dram_used", "ssd_used", "alloc_req", "alloc_success", "alloc_fail",
            "batch_alloc_req"]
    assert keys[:len(head)] == head
    assert keys[-3:] == ["unmount_req", "unmount_success", "unmount_fail"]
    assert len(keys) == 13 + 16 * 3 + 10
    s = summary(m.rest)
    assert s["ssd_used"] == "0/0" and s["hbm_used"] == "0/0"
    assert s["dram_used"].endswith(f"/{128 << 20}")


def test_metrics_families_order_and_promtool(api):
    m, c = api
    c.batch_put([(f"bw/{i}", b"x" * 4096) for i in range(10)])
    r = requests.get(f"{m.rest}/metrics", timeout=10)
    assert r.status_code == 200 and r.headers["Content-Type"] == "text/plain; version=0.0.4"
    families = re.findall(r"^# TYPE (\S+) (\S+)$", r.text, re.M)
    names = [f for f, _ in families]
    order = ["memcache_segment_capacity_bytes", "memcache_total_capacity_bytes",
             "memcache_alloc_requests_total", "memcache_unmount_failures_total",
             "memcache_evict_operations_total", "memcache_evict_running",
             "memcache_get_hits_dram_total", "memcache_stored_keys",
             "memcache_kv_events_published_total", "memcache_kv_events_last_sequence"]
    assert [names.index(n) for n in order] == sorted(names.index(n) for n in order)
    assert "memcache_get_not_found_total" in names
    assert "memcache_alloc_not_found_total" not in names  # only the contract's ops have it
    assert 'memcache_total_capacity_bytes{medium="hbm"} 0' in r.text
    assert 'medium="ssd"' not in r.text.split("memcache_get_requests_total")[0]
    assert 'memcache_segment_capacity_bytes{segment="rank-2-dram"} 134217728' in r.text
    # Extensions come after every contract family.
    ext = [n for n in names if n.startswith("tierkv_")]
    assert names[-len(ext):] == ext
    assert ext[:4] == ["tierkv_dram_fragmentation_ratio", "tierkv_dram_largest_free_bytes",
                       "tierkv_dram_free_ranges", "tierkv_dram_requested_bytes"]
    assert "tierkv_server_connections" in ext and "tierkv_client_metric_ranks" in ext
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian package prometheus) is required"
    check = subprocess.run([promtool, "check", "metrics"], input=r.text, capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def test_client_reported_bandwidth_metrics(api):
    m, c = api
    payload = b"y" * 65536
    deadline = time.time() + 1.5
    while time.time() < deadline:  # reports go out about once a second
        c.batch_put([(f"rep/{i}", payload) for i in range(4)], upsert=True)
        c.batch_get_into([f"rep/{i}" for i in range(4)], [bytearray(65536) for _ in range(4)])
        c.batch_exists([f"rep/{i}" for i in range(4)])
    c.batch_exists(["rep/0"])  # the call that finds the window due posts the report
    text = requests.get(f"{m.rest}/metrics", timeout=10).text
    assert 'memcache_metric_stale{rank="3"} 0' in text
    put_bytes = re.search(r'memcache_bandwidth_bytes_cum_total\{rank="3",operation="batch_put"\} (\S+)',
                          text)
    assert put_bytes and float(put_bytes.group(1)) >= 4 * 65536
    assert re.search(r'memcache_bandwidth_latency_seconds\{rank="3",operation="batch_exist",'
                     r'quantile="P99"\} (\S+)', text)
    assert 'memcache_ubs_io_disk_num{rank="3"} 0' in text


def test_ptracer_tables(api):
    m, c = api
    c.put("tp/a", b"1")
    c.get("tp/a")
    c.remove("tp/a")
    r = requests.get(f"{m.rest}/metrics/ptracer", timeout=10)
    assert r.headers["Content-Type"] == TEXT_TYPE
    lines = r.text.splitlines()
    assert lines[0].split() == ["TIME", "NAME", "BEGIN", "GOOD_END", "BAD_END", "ON_FLY",
                                "P50(us)", "P99(us)", "P999(us)", "AVG(us)", "MAX(us)"]
    rows = {ln.split()[2]: ln.split() for ln in lines[1:]}
    for name in ("TP_MMC_META_ALLOC", "TP_MMC_META_UPDATE_STATE", "TP_MMC_META_GET",
                 "TP_MMC_META_REMOVE"):
        row = rows[name]
        begin, good, bad, on_fly = map(int, row[3:7])
        assert begin >= 1 and begin == good + bad + on_fly
        p50, p99, p999, avg, mx = map(float, row[7:12])
        assert 0 < p50 <= p99 <= p999 <= mx * 1.05 and avg <= mx
    r = requests.get(f"{m.rest}/api/v1/analysis/alloc_free_latency", timeout=10)
    names = {ln.split()[2] for ln in r.text.splitlines()[1:]}
    assert {"TP_MMC_META_ALLOC", "TP_MMC_META_FREE", "TP_MMC_META_REMOVE"} <= names
    assert "TP_MMC_META_GET" not in names


def test_kv_events_status_when_disabled(api):
    m, _ = api
    body = get_json(f"{m.rest}/kv_events/status")
    assert list(body) == ["dropped_events", "dropped_high_priority_events", "dropped_stored_events",
                          "enabled", "last_sequence", "published_batches", "published_by_medium",
                          "published_by_type", "published_events", "publisher_active",
                          "queue_capacity", "queue_size", "skipped_keyless_events",
                          "skipped_unparsed_keys"]
    assert body["enabled"] is False and body["publisher_active"] is False
    assert body["queue_capacity"] == 65536 and body["published_events"] == 0
    assert list(body["published_by_medium"]) == ["dram", "hbm", "ssd", "unknown"]
    assert list(body["published_by_type"]) == ["cleared", "removed", "stored"]


def test_robustness_odd_input_and_many_connections(api):
    m, c = api
    key = "ключ/a b&c=d%"
    c.put(key, b"unicode")
    body = get_json(f"{m.rest}/query_key", params={"key": key})
    assert body["key"] == key and body["valid"]
    r = requests.get(f"{m.rest}/query_key?key=%ZZ%", timeout=10)  # malformed escapes
    assert r.status_code in (200, 400)
    r = requests.get(f"{m.rest}/query_key?key", timeout=10)  # a key without a value
    assert_error(r, "'key'")
    huge = b"z" * (9 << 20)  # over the 8 MiB body limit
    assert_error(requests.put(f"{m.rest}/metadata", params={"key": "big"}, data=huge, timeout=30),
                 "too large", 413)
    assert_error(requests.get(f"{m.rest}/query_key?key=" + "k" * 20000, timeout=10), "too long", 414)
    failures = []

    def hammer() -> None:
        s = requests.Session()
        for _ in range(20):
            try:
                if s.get(f"{m.rest}/health", timeout=10).json()["status"] != "ok":
                    failures.append("bad health")
                if s.get(f"{m.rest}/metrics", timeout=10).status_code != 200:
                    failures.append("metrics")
            except requests.RequestException as e:
                failures.append(repr(e))

    threads = [threading.Thread(target=hammer) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert get_json(f"{m.rest}/health")["status"] == "ok"
    assert c.get(key) == b"unicode"


def test_per_rank_series_and_summary_fields():
    m = Manager("--metrics-per-rank", "true", "--rank", "1")
    try:
        with tierkv.Client(m.uds, rank=5) as c:
            c.put("pr/a", b"1")
            c.get("pr/a")
        text = requests.get(f"{m.rest}/metrics", timeout=10).text
        assert 'memcache_get_successes_total{rank="5"} 1' in text
        assert 'memcache_evict_operations_total{rank="1"} 0' in text
        s = summary(m.rest)
        keys = list(s)
        assert s["get_hit_dram_by_rank_5"] == "1"
        assert "evict_by_rank_1" in s and "flush_bytes_by_rank_5" in s
        assert keys.index("unmount_fail") < keys.index("evict_by_rank_1")
    finally:
        m.close()


def _openssl(*args: str, cwd: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def test_mtls_accepts_signed_clients_and_refuses_others():
    d = tempfile.mkdtemp(prefix="tierkv-tls-")
    try:
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
                 "ca.pem", "-days", "2", "-subj", "/CN=tierkv-test-ca", cwd=d)
        for name, cn in (("server", "127.0.0.1"), ("client", "engine")):
            _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
                     f"{name}.csr", "-subj", f"/CN={cn}", cwd=d)
            ext = os.path.join(d, f"{name}.ext")
            with open(ext, "w") as f:
                f.write("subjectAltName=IP:127.0.0.1\n" if name == "server" else "")
            _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                     "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", ext, cwd=d)
        m = Manager("--metrics-tls", "true", "--metrics-url", "https://127.0.0.1:0",
                    "--ock.mmc.metrics.tls.cert_path", f"{d}/server.pem",
                    "--ock.mmc.metrics.tls.key_path", f"{d}/server.key",
                    "--ock.mmc.metrics.tls.ca_path", f"{d}/ca.pem")
        try:
            assert m.rest.startswith("https://")
            r = requests.get(f"{m.rest}/health", verify=f"{d}/ca.pem",
                             cert=(f"{d}/client.pem", f"{d}/client.key"), timeout=10)
            assert r.json()["status"] == "ok"
            with pytest.raises(requests.exceptions.SSLError):
                requests.get(f"{m.rest}/health", verify=f"{d}/ca.pem", timeout=10)
            with pytest.raises(requests.exceptions.ConnectionError):
                requests.get(m.rest.replace("https://", "http://") + "/health", timeout=10)
        finally:
            m.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_invalid_rest_configuration_fails_at_start():
    from conftest import SERVER_BIN
    for args, fragment in ((["--metrics-url", "ftp://x:1"], "--metrics-url"),
                           (["--metrics-tls", "true"], "--metrics-tls-cert")):
        out = subprocess.run([SERVER_BIN, *args],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 2 and fragment in out.stderr


def test_openapi_document_matches_the_server(api):
    from conftest import ROOT
    m, _ = api
    doc = json.loads((ROOT / "docs" / "openapi.json").read_text())
    assert len(doc["paths"]) == 29  # the contract's 25, /cluster/members and /cache/*
    served = 0
    for path, methods in doc["paths"].items():
        for method in methods:
            r = requests.request(method.upper(), m.rest + path,
                                 params={"key": "x", "keys": "x", "segment": "x", "job_id": "x"},
                                 json={"chunk_hashes": []} if method == "post" else None,
                                 timeout=10)
            assert r.status_code in (200, 413), (method, path, r.status_code)
            served += 1
    assert served == 31  # every endpoint of the contract, /cluster/members and /cache/*


def test_grafana_dashboard_uses_only_exported_metrics(api):
    from conftest import ROOT
    m, c = api
    deadline = time.time() + 1.2  # make the client-reported families appear too
    while time.time() < deadline:
        c.batch_put([("dash/a", b"x")], upsert=True)
        c.batch_get(["dash/a"])
    c.batch_exists(["dash/a"])
    exported = set(re.findall(r"^# TYPE (\S+) ", requests.get(f"{m.rest}/metrics", timeout=10).text,
                              re.M))
    dash = json.loads((ROOT / "deploy" / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    used = {n for e in exprs for n in re.findall(r"memcache_[a-z_]+", e)}
    assert used and used <= exported, used - exported
