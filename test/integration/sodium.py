#!/usr/bin/python3
"""Independent libsodium secretstream (XChaCha20-Poly1305) codec for the integration tests.

WAL-G's libsodium format: a 24-byte secretstream header, then the plaintext in 8192-byte chunks,
each pushed as one message (17 bytes of overhead), the last one tagged FINAL (an empty FINAL
chunk when the plaintext length is a multiple of 8192). Uses libsodium through ctypes, so it
needs no Python package, only the shared library.

usage: sodium.py decrypt|encrypt KEYFILE none|hex|base64  < in > out
Exit 0 on success, 2 on an authentication or format failure.
"""
import base64
import ctypes
import ctypes.util
import sys

CHUNK = 8192
ABYTES = 17
HEADERBYTES = 24
TAG_MESSAGE = 0
TAG_FINAL = 3


def load():
    name = ctypes.util.find_library("sodium") or "libsodium.so.23"
    lib = ctypes.CDLL(name)
    if lib.sodium_init() < 0:
        raise SystemExit("sodium_init failed")
    return lib


def read_key(path, transform):
    with open(path, "rb") as f:
        raw = f.read()
    if transform == "hex":
        key = bytes.fromhex(raw.decode().strip())
    elif transform == "base64":
        key = base64.b64decode(raw.decode().strip())
    elif transform == "none":
        key = raw
    else:
        raise SystemExit("bad transform " + transform)
    if len(key) < 32:
        key = key + bytes(32 - len(key))
    return key[:32]


def decrypt(lib, key, data):
    if len(data) < HEADERBYTES:
        raise ValueError("shorter than the header")
    state = ctypes.create_string_buffer(lib.crypto_secretstream_xchacha20poly1305_statebytes())
    if lib.crypto_secretstream_xchacha20poly1305_init_pull(state, data[:HEADERBYTES], key) != 0:
        raise ValueError("bad header")
    out = []
    pos = HEADERBYTES
    final = False
    while pos < len(data):
        if final:
            raise ValueError("data after the FINAL chunk")
        c = data[pos:pos + CHUNK + ABYTES]
        pos += len(c)
        m = ctypes.create_string_buffer(max(len(c) - ABYTES, 1))
        mlen = ctypes.c_ulonglong(0)
        tag = ctypes.c_ubyte(0)
        if lib.crypto_secretstream_xchacha20poly1305_pull(
                state, m, ctypes.byref(mlen), ctypes.byref(tag), c, ctypes.c_ulonglong(len(c)),
                None, ctypes.c_ulonglong(0)) != 0:
            raise ValueError("chunk at offset %d failed authentication" % (pos - len(c)))
        out.append(m.raw[:mlen.value])
        final = tag.value == TAG_FINAL
    if not final:
        raise ValueError("no FINAL chunk (truncated)")
    return b"".join(out)


def encrypt(lib, key, data):
    state = ctypes.create_string_buffer(lib.crypto_secretstream_xchacha20poly1305_statebytes())
    header = ctypes.create_string_buffer(HEADERBYTES)
    lib.crypto_secretstream_xchacha20poly1305_init_push(state, header, key)
    out = [header.raw]
    chunks = [data[i:i + CHUNK] for i in range(0, len(data), CHUNK)]
    if len(data) % CHUNK == 0:
        chunks.append(b"")
    for i, m in enumerate(chunks):
        c = ctypes.create_string_buffer(len(m) + ABYTES)
        tag = TAG_FINAL if i == len(chunks) - 1 else TAG_MESSAGE
        lib.crypto_secretstream_xchacha20poly1305_push(
            state, c, None, m, ctypes.c_ulonglong(len(m)), None, ctypes.c_ulonglong(0),
            ctypes.c_ubyte(tag))
        out.append(c.raw)
    return b"".join(out)


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("decrypt", "encrypt"):
        sys.stderr.write(__doc__)
        return 64
    lib = load()
    key = read_key(sys.argv[2], sys.argv[3])
    data = sys.stdin.buffer.read()
    try:
        out = decrypt(lib, key, data) if sys.argv[1] == "decrypt" else encrypt(lib, key, data)
    except ValueError as e:
        sys.stderr.write("sodium.py: %s\n" % e)
        return 2
    sys.stdout.buffer.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
