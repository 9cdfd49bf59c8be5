"""tierkv.admin against a real manager."""

from __future__ import annotations

import pytest

import tierkv
from tierkv.admin import Admin, AdminError


def test_admin_helper(manager):
    admin = Admin(manager.rest)
    assert admin.health()["status"] == "ok"
    assert admin.role() == "leader"
    with tierkv.Client(manager.uds, "admin-test") as c:
        c.put("a", b"12345")
        s = admin.summary()
        assert int(s["keys"]) >= 1 and s["ssd_used"] == "0/0"
        assert admin.query_key("a", tenant="admin-test")["size"] == 5
        data = admin.batch_query_keys(["a", "b"], tenant="admin-test")
        assert [d["valid"] for d in data] == [True, False]
        assert admin.get_all_keys(tenant="admin-test") == ["a"]
        with pytest.raises(tierkv.NotFound):
            admin.query_key("missing", tenant="admin-test")
        assert "memcache_stored_keys" in admin.metrics()
        assert admin.segments()[0]["segment_name"] == "rank-0-dram"
        assert admin.kv_events_status()["enabled"] is False
        assert admin.prefetch(["a"], "req-1", tenant="admin-test")["lookup_id"] == "req-1"
        c.put("b", b"1")
        admin.delete_key("b", tenant="admin-test")
        assert not c.exists("b")
        with pytest.raises(tierkv.NotFound):
            admin.delete_key("b", tenant="admin-test")
        assert admin.evict(["a"], tenant="admin-test") == 1
        with pytest.raises(AdminError, match="chunk_hashes"):
            admin.evict(["a", ""], tenant="admin-test")
