"""The op catalog, read from the proto descriptors: the single definition every door uses.

Each RPC's `(loom.options.v1.op)` option names the op and its access rules; the request
message's descriptor gives the JSON schema that REST validates against, MCP lists and the SDK
generator reads. By concern:

- `ops.py`: `OpSpec`, `Catalog` (every op by name and gRPC path; a request parsed and checked), `load_catalog`
- `schema.py`: the JSON schemas, from the descriptors and the field options
- `validation.py`: an input schema checked; the refusal naming the bad field
- `parse.py`: JSON arguments into a request message
- `mapping.py`: typed rows into messages and requests into typed rows, field by field by name
- `to_json.py`: a message as JSON, through `converters.py` (generated: scripts/gen_converters.py)
  and `json_values.py`; `timestamps.py`: instants as RFC 3339 UTC
"""

from .json_values import dict_to_struct, struct_to_dict
from .mapping import dataclass_from, message_from
from .ops import Catalog, OpSpec, load_catalog
from .schema import NAMESPACE_PATTERN, NOT_BLANK, field_options, field_schema, message_schema, request_schema, response_schema
from .timestamps import normalize_timestamps, rfc3339
from .to_json import message_to_json, message_to_json_reference, message_to_sparse_json
from .validation import FORMATS

__all__ = [
    "FORMATS",
    "NAMESPACE_PATTERN",
    "NOT_BLANK",
    "Catalog",
    "OpSpec",
    "dataclass_from",
    "dict_to_struct",
    "field_options",
    "field_schema",
    "load_catalog",
    "message_from",
    "message_schema",
    "message_to_json",
    "message_to_json_reference",
    "message_to_sparse_json",
    "normalize_timestamps",
    "request_schema",
    "response_schema",
    "rfc3339",
    "struct_to_dict",
]
