"""A protocol fuzzer for the broker: mutated golden frames of every client, over many connections.

`corpus` loads the request frames real clients sent (tests/golden/frames), `mutate`
damages them (bit flips, boundary values in lengths and counts, truncation,
extension, lying size prefixes, random bytes, splices, frames split at every
byte; on a SASL listener also the login's own frames), `campaign` sends them at a real broker process while a real client
produces and consumes beside them and the broker's memory and event-loop latency
are sampled. `atheris_target` drives the decoders and the frame reader with
coverage guidance. Full size:

    python -m interop.fuzz --frames 1000000 --connections 32

(see `python -m interop.fuzz --help`); CI runs a bounded campaign in interop/test_fuzz.py.
"""
