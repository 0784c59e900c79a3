"""Decoding: vendor change messages in, canonical change events out.

Vendor packages (``goldengate``, ``debezium``, ``alibaba``, ``qlik``) stand on vendor-neutral
transport packages (``files``, ``kafka``, ``avro``) and on one base flow that owns the projection
into the canonical event. The registry of formats is :data:`lakecdc.decoders.DECODERS` until every
vendor has moved here.
"""
