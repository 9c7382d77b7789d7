#!/usr/bin/env python3
"""Writes tofino_device_config.bin, the fixture of tests/tofino.rs, without
any metaroce code: the device_data layout of the SDE's P4Runtime server
(each part a little-endian u32 length, then the bytes: program name,
tofino.bin, context.json) inside a p4.tmp.P4DeviceConfig encoded by hand
(field 1 reassign = true, field 3 device_data). The tofino.bin part is a
small but whole bfas binary (the controller checks its records).

    python3 ctrl/p4rt/tests/data/make_tofino_fixture.py
"""
import os
import struct

name = b"main"


def bson_string(key, value):
    value = value.encode() + b"\x00"
    return b"\x02" + key.encode() + b"\x00" + struct.pack("<i", len(value)) + value


# A bfas binary as bf-asm's dumper reads it: an H record (a BSON document
# naming the program and the compile), a B block of 192 32-bit words, and
# an R register write.
header = bson_string("program_name", "main") + bson_string("run_id", "0123456789abcdef")
header = struct.pack("<i", len(header) + 5) + header + b"\x00"
tofino_bin = (
    b"\x00\x00\x00H" + header
    + b"\x00\x00\x00B" + struct.pack("<QII", 0x2000000, 32, 192) + bytes(range(256)) * 3
    + b"\x00\x00\x00R" + struct.pack("<II", 0x100, 0xFF)
)
context_json = b'{"program_name": "main.p4", "run_id": "0123456789abcdef", "schema_version": "1.0"}'

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
