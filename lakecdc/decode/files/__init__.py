"""Input files: staging them one record per line, reading lines and JSON messages with their origin,
kcat dumps, splits for the executors, and bad records found again for the quarantine.

Modules: :mod:`~lakecdc.decode.files.staging`, :mod:`~lakecdc.decode.files.lines`,
:mod:`~lakecdc.decode.files.kcat`, :mod:`~lakecdc.decode.files.splits`,
:mod:`~lakecdc.decode.files.reread`. No vendor's names here.
"""
