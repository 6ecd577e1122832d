"""The OpenAPI 3.1 document of ``accel serve`` (served at ``/openapi.json``).

Written out here rather than generated from the handlers, so that it is reviewed like code; a
test checks the routes of the app and this document name the same operations, and that the
snapshot in ``docs/service-openapi.json`` is current (``scripts/gen_openapi.py --check``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["openapi"]

_ERR = {"description": "an error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
_COMMON = {"401": _ERR, "413": _ERR, "429": _ERR}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(ref: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(ref)}}}


_JOB_ID = {"name": "job_id", "in": "path", "required": True,
           "schema": {"type": "string", "pattern": r"^j[0-9]{6}-[0-9a-f]{6}$"}}

_JOB_REQUEST: dict[str, Any] = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"},
        "command": {"type": "array", "items": {"type": "string", "maxLength": 4096}, "maxItems": 256,
                    "description": "argv; never given to a shell"},
        "env": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 4096},
                "description": "names must be on the service's allowlist"},
        "devices": {"type": "integer", "minimum": 1, "maximum": 4096},
        "model": {"type": "string", "description": "a device model (pool) or a part of its name"},
        "vendor": {"type": "string"},
        "pool": {"type": "string", "description": "take this pool's quote"},
        "partition": {"type": "string", "description": "a hardware partition profile (MIG 1g.10gb...): the job "
                      "gets `devices` whole partitions of it"},
        "share": {"type": "object", "properties": {"compute_milli": {"type": "integer"},
                                                   "memory_bytes": {"type": "integer"}}},
        "topology": {"type": "object", "properties": {
            "level": {"enum": ["link_domain", "pcie_switch", "numa", "host", "rack", "switch_group"]},
            "required": {"type": "boolean"}}},
        "same_host": {"type": "boolean", "description": "false: a gang split over hosts, placed all-or-nothing"},
        "priority_class": {"type": "string"},
        "duration_s": {"type": "number", "exclusiveMinimum": 0, "description": "expected run time"},
        "time_limit_s": {"type": "number", "exclusiveMinimum": 0},
        "checkpoint": {"type": "object", "properties": {"signal": {"type": ["string", "integer"]},
                                                        "interval_s": {"type": "number"}}},
        "tenant": {"type": "string", "description": "admins only: submit for this tenant"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "required": ["command"],
}


_SERVING_NAME = {"name": "name", "in": "path", "required": True,
                 "schema": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]{0,47}$"}}
_REPLICAS = {"type": "integer", "minimum": 0, "maximum": 64}
_SERVING_REQUEST: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["name"],
    "description": "a JobRequest (each replica's job) and the group's fields.  Under --sim: no command (each "
                   "replica is accel's fake vLLM engine, engine holds its options).  Under real executors: command "
                   "is the engine's, required, with {port} (and {kv_port} when engine.kv_events) replaced by the "
                   "ports the service chose (also in ACCEL_REPLICA_PORT / ACCEL_REPLICA_KV_PORT)",
    "properties": {
        **{k: v for k, v in _JOB_REQUEST["properties"].items() if k != "checkpoint"},
        "name": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]{0,47}$"},
        "replicas": {**_REPLICAS, "default": 1},
        "engine": {"type": "object", "additionalProperties": False, "properties": {
            "model": {"type": "string", "description": "--sim: the model name the engine serves (default llama-2-70b)"},
            "cost_model": {"type": "string"}, "cost_device": {"type": "string",
                                                              "description": "the cost profile of scheduler.serving"},
            "time_scale": {"type": "number", "exclusiveMinimum": 0, "maximum": 10000},
            "max_num_seqs": {"type": "integer", "minimum": 1, "maximum": 4096},
            "kv_events": {"type": "boolean", "description": "the replicas publish vLLM KV events (--sim: default "
                          "true; an engine command: false, true declares the {kv_port})"},
            "ready_timeout_s": {"type": "number", "minimum": 1, "maximum": 86400,
                                "description": "an engine command: seconds to its first healthy answer (default 600)"},
            "health_path": {"type": "string", "description": "an engine command: its health check (default /health)"},
        }},
    },
}


def _serving_paths(auth: list[dict[str, list[str]]]) -> dict[str, Any]:
    """The serving groups' operations (:mod:`._serving_api`)."""
    return {
    "/v1/serving": {
        "post": {"operationId": "serving_create", "summary": "a serving group: replica jobs kept at a count "
                 "(under --sim each running replica is a fake vLLM engine on a loopback port; under local / slurm each "
                 "replica job runs the group's engine command on the port the service chose)",
                 "security": auth, "requestBody": {"required": True, "content": {"application/json": {
                     "schema": _ref("ServingRequest")}}},
                 "responses": {"201": _json("Serving", "the group"), "400": _ERR, "409": _ERR, **_COMMON}},
        "get": {"operationId": "serving_list", "summary": "the caller's serving groups", "security": auth,
                "responses": {"200": _json("ServingList", "the groups"), **_COMMON}}},
    "/v1/serving/{name}": {"get": {
        "operationId": "serving_show", "summary": "a serving group and its replicas' addresses (what accel "
        "router --from-serve reads)", "security": auth, "parameters": [_SERVING_NAME],
        "responses": {"200": _json("Serving", "the group"), "404": _ERR, **_COMMON}}},
    "/v1/serving/{name}/scale": {"post": {
        "operationId": "serving_scale", "summary": "set the replica count", "security": auth,
        "parameters": [_SERVING_NAME], "requestBody": {"required": True, "content": {"application/json": {
            "schema": {"type": "object", "additionalProperties": False, "required": ["replicas"],
                       "properties": {"replicas": _REPLICAS}}}}},
        "responses": {"200": _json("Serving", "the group"), "400": _ERR, "404": _ERR, "409": _ERR,
                      **_COMMON}}},
    "/v1/serving/{name}/cancel": {"post": {
        "operationId": "serving_cancel", "summary": "cancel every replica; the group ends", "security": auth,
        "parameters": [_SERVING_NAME],
        "responses": {"200": _json("Serving", "the group"), "404": _ERR, "409": _ERR, **_COMMON}}},
    }


def openapi(version: str) -> dict[str, Any]:
    """The document; ``version`` is accel's version."""
    auth: list[dict[str, list[str]]] = [{"bearer": []}]
    return {
        "openapi": "3.1.0",
        "info": {"title": "accel serve", "version": version,
                 "description": "Submit jobs, get a quote per pool, follow them, read their record and the bill."},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {"type": "object", "properties": {"error": {"type": "object", "properties": {
                    "code": {"type": "string"}, "message": {"type": "string"}, "field": {"type": "string"}}}}},
                "JobRequest": _JOB_REQUEST,
                "Quote": {"type": "object", "properties": {
                    "pool": {"type": "string"}, "wait_p50_s": {"type": ["number", "null"]},
                    "wait_p90_s": {"type": ["number", "null"]}, "price_per_device_hour": {"type": "number"},
                    "expected_cost": {"type": "number"}, "currency": {"type": "string"},
                    "reason": {"type": "string"}, "why": {"type": "string"}}},
                "Quotes": {"type": "object", "properties": {"quotes": {"type": "array", "items": _ref("Quote")}}},
                "JobSummary": {"type": "object", "properties": {
                    "id": {"type": "string"}, "name": {"type": "string"}, "tenant": {"type": "string"},
                    "state": {"type": "string"}, "pool": {"type": ["string", "null"]},
                    "devices": {"type": "integer"}}},
                "JobList": {"type": "object", "properties": {"jobs": {"type": "array", "items": _ref("JobSummary")}}},
                "JobRecord": {"type": "object", "description": "the whole record: timeline, allocation, exit, bill",
                              "properties": {"id": {"type": "string"}, "state": {"type": "string"},
                                             "timeline": {"type": "array"}, "allocation": {"type": "object"},
                                             "exit": {"type": ["object", "null"]}, "bill": {"type": "object"},
                                             "wait": {"type": "object"}, "quote": {"type": "object"}}},
                "Bill": {"type": "object", "properties": {"lines": {"type": "array"}, "total": {"type": "number"},
                                                          "currency": {"type": "string"}}},
                "Pools": {"type": "object", "properties": {"pools": {"type": "array"}}},
                "ServingRequest": _SERVING_REQUEST,
                "Serving": {"type": "object", "properties": {
                    "id": {"type": "string"}, "name": {"type": "string"}, "tenant": {"type": "string"},
                    "state": {"enum": ["active", "cancelled", "failed"]}, "reason": {"type": "string"},
                    "replicas_wanted": {"type": "integer"}, "replicas_ready": {"type": "integer"},
                    "replicas_ended": {"type": "integer"}, "engine": {"type": "object"},
                    "replicas": {"type": "array", "items": {"type": "object", "properties": {
                        "job": {"type": "string"}, "index": {"type": "integer"}, "state": {"type": "string"},
                        "ready": {"type": "boolean"}, "address": {"type": ["string", "null"]},
                        "kv_events": {"type": ["string", "null"],
                                      "description": "the replica's KV-event endpoint (tcp://HOST:PORT) once ready"},
                        "port": {"type": ["integer", "null"], "description": "the port chosen for an engine command"},
                        "engine_pid": {"type": ["integer", "null"]},
                        "role": {"enum": ["both", "prefill", "decode"]}}}}}},
                "ServingList": {"type": "object", "properties": {"serving": {"type": "array",
                                                                             "items": _ref("Serving")}}},
            },
        },
        "paths": {
            "/healthz": {"get": {"operationId": "health", "summary": "liveness", "security": [],
                                 "responses": {"200": {"description": "ok"}}}},
            "/v1/quotes": {"post": {
                "operationId": "quote", "summary": "every pool that can take the job: wait p50/p90, price, cost, why",
                "security": auth, "requestBody": {"required": True, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/JobRequest"}}}},
                "responses": {"200": _json("Quotes", "the quotes, best first"), "400": _ERR, **_COMMON}}},
            "/v1/jobs": {
                "post": {"operationId": "submit", "summary": "submit a job", "security": auth,
                         "requestBody": {"required": True, "content": {"application/json": {
                             "schema": {"$ref": "#/components/schemas/JobRequest"}}}},
                         "responses": {"201": _json("JobRecord", "the new job's record"), "400": _ERR, **_COMMON}},
                "get": {"operationId": "list", "summary": "jobs of the caller's tenant (all, for an admin)",
                        "security": auth, "parameters": [
                            {"name": "state", "in": "query", "schema": {"type": "string"}},
                            {"name": "limit", "in": "query", "schema": {"type": "integer", "maximum": 1000}}],
                        "responses": {"200": _json("JobList", "jobs, newest first"), **_COMMON}}},
            "/v1/jobs/{job_id}": {"get": {
                "operationId": "show", "summary": "a job's whole record", "security": auth, "parameters": [_JOB_ID],
                "responses": {"200": _json("JobRecord", "the record"), "404": _ERR, **_COMMON}}},
            "/v1/jobs/{job_id}/cancel": {"post": {
                "operationId": "cancel", "summary": "cancel a job", "security": auth, "parameters": [_JOB_ID],
                "responses": {"200": _json("JobRecord", "the record"), "404": _ERR, "409": _ERR, **_COMMON}}},
            "/v1/jobs/{job_id}/logs": {"get": {
                "operationId": "logs", "summary": "a job's log (its tail, or the whole file)", "security": auth,
                "parameters": [_JOB_ID, {"name": "stream", "in": "query", "schema": {"enum": ["stdout", "stderr"]}},
                               {"name": "tail", "in": "query", "schema": {"type": "integer", "minimum": 0}}],
                "responses": {"200": {"description": "the log", "content": {"text/plain": {}}}, "404": _ERR,
                              **_COMMON}}},
            "/v1/bill": {"get": {"operationId": "bill", "summary": "usage priced from the stored price table",
                                 "security": auth, "responses": {"200": _json("Bill", "bill lines"), **_COMMON}}},
            **_serving_paths(auth),
            "/v1/pools": {"get": {"operationId": "pools", "summary": "pools: devices, free, queue, price",
                                  "security": auth, "responses": {"200": _json("Pools", "pools"), **_COMMON}}},
        },
    }
