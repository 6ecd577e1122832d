"""The field-value answers read from the ctypes array's bytes equal the binding's own attributes,
for every NVML value type, error returns and unknown types included."""

from __future__ import annotations

from typing import Any

import pytest

from accel.plugins.nvidia._nvml import VALUE_MEMBERS, field_answers, load_pynvml


def _array(rows: list[tuple[int, int, str, Any]]) -> Any:
    pynvml = load_pynvml()
    arr = (pynvml.c_nvmlFieldValue_t * len(rows))()
    for i, (ret, vtype, member, value) in enumerate(rows):
        arr[i].fieldId, arr[i].scopeId, arr[i].nvmlReturn, arr[i].valueType = 100 + i, i, ret, vtype
        if member:
            setattr(arr[i].value, member, value)
    return arr


ROWS = [
    (0, 0, "dVal", 1234.5),
    (0, 1, "uiVal", 2**32 - 2),
    (0, 2, "ulVal", 2**63 + 7),
    (0, 3, "ullVal", 2**64 - 2),
    (0, 4, "sllVal", -(2**62)),
    (0, 5, "siVal", -7),
    (0, 6, "usVal", 65534),
    (3, 3, "ullVal", 99),  # NOT_SUPPORTED: no value, whatever the union holds
    (2, 0, "", 0),  # INVALID_ARGUMENT (an unknown field id)
    (15, 1, "uiVal", 1),  # GPU_IS_LOST
    (0, 9, "ullVal", 5),  # a value type this code does not know: None, never a guess
]


def test_bytes_and_attributes_agree_for_every_value_type() -> None:
    arr = _array(ROWS)
    fast = field_answers(arr)
    slow = field_answers(list(arr))  # a plain list: the attribute path
    assert fast == slow
    expected = [(ret, value if ret == 0 and vtype < len(VALUE_MEMBERS) else None) for ret, vtype, _, value in ROWS]
    assert fast == expected


@pytest.mark.parametrize("n", [0, 1, 91])
def test_sizes(n: int) -> None:
    arr = _array([(0, 3, "ullVal", i) for i in range(n)])
    assert field_answers(arr) == [(0, i) for i in range(n)]
