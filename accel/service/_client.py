"""The client of ``accel serve``: ``accel job ...`` and ``accel bill`` over its HTTP API (httpx)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx

from accel.errors import AccelError, ConfigError

__all__ = ["ServiceClient", "ServiceClientError", "bill_main", "job_main", "request_body"]


class ServiceClientError(AccelError):
    """The service answered with an error, or could not be reached."""

    code = "service.error"


class ServiceClient:
    """A thin client: one method per API operation, errors as :class:`ServiceClientError`."""

    def __init__(self, server: str, token: str, *, timeout_s: float = 30.0) -> None:
        self.server = server.rstrip("/")
        self._http = httpx.Client(base_url=self.server, timeout=timeout_s,
                                  headers={"Authorization": f"Bearer {token}"})

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            resp = self._http.request(method, path, **kw)
        except httpx.HTTPError as exc:
            raise ServiceClientError(f"cannot reach accel serve at {self.server}: {exc}") from None
        if resp.status_code >= 400:
            try:
                err = resp.json()["error"]
                msg = f"{err['message']} (HTTP {resp.status_code}, {err['code']})"
            except (ValueError, KeyError, TypeError):
                msg = f"HTTP {resp.status_code}: {resp.text[:200]}"
            raise ServiceClientError(msg)
        return resp

    def quote(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        return list(self._call("POST", "/v1/quotes", json=body).json()["quotes"])

    def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self._call("POST", "/v1/jobs", json=body).json())

    def jobs(self, state: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"limit": limit}
        if state:
            params["state"] = state
        return list(self._call("GET", "/v1/jobs", params=params).json()["jobs"])

    def show(self, job_id: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/v1/jobs/{_quote_id(job_id)}").json())

    def cancel(self, job_id: str) -> dict[str, Any]:
        return dict(self._call("POST", f"/v1/jobs/{_quote_id(job_id)}/cancel").json())

    def logs(self, job_id: str, stream: str = "stdout", tail: int | None = None) -> str:
        params: dict[str, Any] = {"stream": stream}
        if tail is not None:
            params["tail"] = tail
        return self._call("GET", f"/v1/jobs/{_quote_id(job_id)}/logs", params=params).text

    def bill(self) -> dict[str, Any]:
        return dict(self._call("GET", "/v1/bill").json())

    def serving_create(self, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self._call("POST", "/v1/serving", json=body).json())

    def serving_list(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/v1/serving").json()["serving"])

    def serving_show(self, name: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/v1/serving/{_quote_id(name)}").json())

    def serving_scale(self, name: str, replicas: int) -> dict[str, Any]:
        return dict(self._call("POST", f"/v1/serving/{_quote_id(name)}/scale", json={"replicas": replicas}).json())

    def serving_cancel(self, name: str) -> dict[str, Any]:
        return dict(self._call("POST", f"/v1/serving/{_quote_id(name)}/cancel").json())


def _quote_id(job_id: str) -> str:
    return httpx.URL("/" + job_id).raw_path.decode("ascii").lstrip("/").replace("/", "%2F")


def _client(args: argparse.Namespace) -> ServiceClient:
    server = args.server or os.environ.get("ACCEL_SERVER") or "http://127.0.0.1:8470"
    token = args.token or os.environ.get("ACCEL_TOKEN")
    token_file = args.token_file or os.environ.get("ACCEL_TOKEN_FILE")
    if not token and token_file:
        try:
            token = Path(token_file).read_text(encoding="ascii").strip()
        except OSError as exc:
            raise ConfigError(f"--token-file {token_file}: {exc.strerror}") from None
    if not token:
        raise ConfigError("no token: pass --token, --token-file, or set ACCEL_TOKEN (the first admin token is "
                          "STATE/admin.token)")
    return ServiceClient(server, token)


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise ConfigError(f"--{what} {item!r}: expected NAME=VALUE")
        out[k] = v
    return out


def request_body(args: argparse.Namespace) -> dict[str, Any]:
    """The JSON body of a submit / quote from the job options."""
    command = list(args.argv)
    if command and command[0] == "--":
        command = command[1:]
    body: dict[str, Any] = {"command": command, "devices": args.devices}
    for key, value in (("name", args.name), ("model", args.model), ("vendor", args.vendor), ("pool", args.pool),
                       ("partition", args.partition),
                       ("priority_class", args.priority_class), ("duration_s", args.duration),
                       ("time_limit_s", args.time_limit), ("tenant", args.tenant)):
        if value is not None:
            body[key] = value
    if args.share is not None:
        body["share"] = {"compute_milli": args.share, "memory_bytes": args.share_memory or 0}
    if args.topology:
        body["topology"] = {"level": args.topology, "required": bool(args.topology_required)}
    if args.same_host:
        body["same_host"] = True
    if args.checkpoint_signal is not None or args.checkpoint_interval is not None:
        ck: dict[str, Any] = {}
        if args.checkpoint_signal is not None:
            ck["signal"] = int(args.checkpoint_signal) if args.checkpoint_signal.isdigit() else args.checkpoint_signal
        if args.checkpoint_interval is not None:
            ck["interval_s"] = args.checkpoint_interval
        body["checkpoint"] = ck
    if args.env:
        body["env"] = _pairs(args.env, "env")
    if args.label:
        body["labels"] = _pairs(args.label, "label")
    return body


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=False)]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths, strict=False)).rstrip()]
    for r in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=False)).rstrip())
    return "\n".join(lines)


def _secs(v: Any) -> str:
    if v is None:
        return "never"
    v = float(v)
    return f"{v:.0f} s" if v < 120 else (f"{v / 60:.1f} min" if v < 7200 else f"{v / 3600:.1f} h")


def _out(text: str) -> None:
    sys.stdout.write(text + ("\n" if not text.endswith("\n") else ""))


def job_main(args: argparse.Namespace) -> int:
    client = _client(args)
    try:
        action = args.job_action
        if action == "quote":
            quotes = client.quote(request_body(args))
            if args.json:
                _out(json.dumps(quotes, indent=2))
            else:
                _out(_table([[q["pool"], _secs(q["wait_p50_s"]), _secs(q["wait_p90_s"]),
                              f"{q['price_per_device_hour']:.2f}", f"{q['expected_cost']:.2f} {q['currency']}",
                              q["why"]] for q in quotes],
                            ["POOL", "WAIT P50", "WAIT P90", "PRICE/DEV-H", "EXPECTED COST", "WHY"]))
        elif action == "submit":
            body = request_body(args)
            if not body["command"]:
                raise ConfigError("accel job submit: give the command after --: accel job submit -- python train.py")
            rec = client.submit(body)
            if args.json:
                _out(json.dumps(rec, indent=2))
            else:
                q = rec.get("quote") or {}
                _out(f"{rec['id']}  {rec['state']}  pool {q.get('pool', '?')}, wait about {_secs(q.get('wait_p50_s'))}"
                     f", {q.get('expected_cost', 0):.2f} {q.get('currency', '')} expected")
                _out(f"page: {client.server}/jobs/{rec['id']}")
        elif action == "ls":
            jobs = client.jobs(args.state, args.limit)
            if args.json:
                _out(json.dumps(jobs, indent=2))
            else:
                _out(_table([[j["id"], j["name"], j["tenant"], j["state"], j["pool"] or "", str(j["devices"])]
                             for j in jobs], ["JOB", "NAME", "TENANT", "STATE", "POOL", "DEVICES"]))
        elif action in ("show", "cancel"):
            rec = client.show(args.job_id) if action == "show" else client.cancel(args.job_id)
            if args.json:
                _out(json.dumps(rec, indent=2))
            else:
                _out(_describe(rec, client.server))
        elif action == "logs":
            sys.stdout.write(client.logs(args.job_id, args.stream, args.tail))
        elif action == "serving":
            from ._serving_cli import serving_main

            return serving_main(args, client, _out)
        return 0
    finally:
        client.close()


def _describe(rec: dict[str, Any], server: str) -> str:
    lines = [f"job {rec['id']} ({rec['name']}), tenant {rec['tenant']}: {rec['state']}",
             f"  command: {' '.join(rec['command'])}",
             f"  pool: {rec['pool'] or '-'}, attempts {rec['attempts']}",
             f"  wait: quoted {_secs(rec['wait']['quoted_p50_s'])} (p90 {_secs(rec['wait']['quoted_p90_s'])}), "
             f"actual {_secs(rec['wait']['actual_s'])}"]
    hosts = sorted({d["host"] for d in rec["allocation"]["devices"]})
    if hosts:
        lines.append(f"  allocation: {len(rec['allocation']['devices'])} device(s) on {', '.join(hosts)}")
    if rec.get("exit"):
        e = rec["exit"]
        lines.append(f"  exit: code {e['exit_code']}, {e['reason']} ({e['detail']})")
    if rec.get("serving"):
        s = rec["serving"]
        where = s["address"] or "(not serving yet)"
        lines.append(f"  serving: replica {s['index']} of {s['group']}, engine at {where}")
    lines.append(f"  bill: {rec['bill']['total']:.4f} {rec['bill']['currency']}")
    lines.append(f"  page: {server}/jobs/{rec['id']}")
    return "\n".join(lines)


def bill_main(args: argparse.Namespace) -> int:
    client = _client(args)
    try:
        bill = client.bill()
    finally:
        client.close()
    if args.json:
        _out(json.dumps(bill, indent=2))
        return 0
    rows = [[str(x["tenant"]), str(x["model"]), f"{x['device_hours']:.4f}", f"{x['cost']:.4f} {x['currency']}"]
            for x in bill["lines"]]
    rows.append(["total", "", "", f"{bill['total']:.4f} {bill['currency']}"])
    _out(_table(rows, ["TENANT", "MODEL", "DEVICE-HOURS", "COST"]))
    return 0
