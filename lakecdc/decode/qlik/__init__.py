"""Qlik Replicate / Qlik Talend Data Integration: ``qlik-json`` and ``qlik-avro`` (see :mod:`lakecdc.decode.qlik.decoders`)."""
