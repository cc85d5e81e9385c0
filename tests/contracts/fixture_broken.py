"""A trainable module that fails on import, for the P503 test."""

print("this output must not reach plan validate's output")
raise RuntimeError("boom at import")
