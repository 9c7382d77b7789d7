#!/usr/bin/env python3
"""Writes tofino_device_config.bin, the fixture of tests/tofino.rs, without
any metaroce code: the device_data layout of the SDE's P4Runtime server
(each part a little-endian u32 length, then the bytes: program name,
tofino.bin, context.json) inside a p4.tmp.P4DeviceConfig encoded by hand
(field 1 reassign = true, field 3 device_data).

    python3 ctrl/p4rt/tests/data/make_tofino_fixture.py
"""
import os
import struct

name = b"main"
tofino_bin = bytes(range(256)) * 3 + b"\x00\xff"
context_json = b'{"program_name": "main.p4", "schema_version": "1.0"}'

data = b""
for part in (name, tofino_bin, context_json):
    data += struct.pack("<I", len(part)) + part


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


msg = b"\x08\x01" + b"\x1a" + varint(len(data)) + data
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "tofino_device_config.bin"), "wb") as f:
    f.write(msg)
