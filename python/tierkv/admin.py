"""A small helper over a manager's REST admin API (docs/rest-api.md).

    from tierkv.admin import Admin
    admin = Admin("http://127.0.0.1:8000")
    admin.health()["status"]          # "ok"
    admin.summary()["dram_used"]      # "4096/1073741824"
    admin.query_key("layer0/block42") # {"key": ..., "size": ..., "blobs": [...]}

Business errors (the API's {"success": false, ...} body) raise
:class:`AdminError` with the manager's error_message; a miss raises
:class:`tierkv.NotFound`.
"""

from __future__ import annotations

from typing import Any, Sequence

import requests

from .errors import NotFound, TierkvError


class AdminError(TierkvError):
    """The REST API answered with its error body."""

    name = "ADMIN_ERROR"


class Admin:
    """Client of one manager's REST admin API. ``cert`` and ``verify`` are
    passed to requests for mTLS (client certificate and CA)."""

    def __init__(self, url: str = "http://127.0.0.1:8000", *, timeout: float = 10,
                 cert: Any = None, verify: Any = True):
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.session = requests.Session()
        self.session.cert = cert
        self.session.verify = verify

    def _get(self, path: str, **params: Any) -> requests.Response:
        r = self.session.get(self.url + path, params=params or None, timeout=self.timeout)
        self._check(r)
        return r

    def _check(self, r: requests.Response) -> None:
        if r.headers.get("Content-Type", "").startswith("application/json"):
            body = r.json()
            if isinstance(body, dict) and body.get("success") is False:
                msg = body.get("error_message", "")
                raise (NotFound if "not found" in msg.lower() else AdminError)(msg)
        if r.status_code != 200:
            raise AdminError(f"HTTP {r.status_code}: {r.text[:200]}")

    # -- state --------------------------------------------------------------
    def health(self) -> dict:
        return self._get("/health").json()

    def role(self) -> str:
        return self._get("/role").text

    def summary(self) -> dict[str, str]:
        """/metrics/summary as an ordered dict of its key=value fields."""
        return dict(kv.split("=", 1) for kv in self._get("/metrics/summary").text.split())

    def metrics(self) -> str:
        """The Prometheus exposition text."""
        return self._get("/metrics").text

    def kv_events_status(self) -> dict:
        return self._get("/kv_events/status").json()

    def segments(self) -> list[dict]:
        return self._get("/api/v1/capacity/segment_remaining").json()["segments"]

    # -- keys ---------------------------------------------------------------
    def query_key(self, key: str, tenant: str = "default") -> dict:
        return self._get("/query_key", key=key, tenant=tenant).json()

    def batch_query_keys(self, keys: Sequence[str], tenant: str = "default") -> list[dict]:
        return self._get("/batch_query_keys", keys=",".join(keys), tenant=tenant).json()["data"]

    def get_all_keys(self, tenant: str = "default") -> list[str]:
        return self._get("/get_all_keys", tenant=tenant).text.splitlines()

    def delete_key(self, key: str, tenant: str = "default") -> None:
        self._check(self.session.delete(self.url + "/key", params={"key": key, "tenant": tenant},
                                        timeout=self.timeout))

    # -- tiers --------------------------------------------------------------
    def evict(self, keys: Sequence[str], *, one_tier_down: bool = False,
              tenant: str = "default") -> int:
        body: dict[str, Any] = {"chunk_hashes": list(keys), "tenant_id": tenant}
        if one_tier_down:
            body["locations"] = ["LocalCPUBackend"]
        r = self.session.post(self.url + "/memory/evict", json=body, timeout=self.timeout)
        self._check(r)
        return r.json()["num_evicted"]

    def prefetch(self, keys: Sequence[str], lookup_id: str = "",
                 tenant: str = "default") -> dict:
        r = self.session.post(self.url + "/memory/prefetch",
                              json={"chunk_hashes": list(keys), "lookup_id": lookup_id,
                                    "tenant_id": tenant}, timeout=self.timeout)
        self._check(r)
        return r.json()
