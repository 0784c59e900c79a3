"""Spark itself: the supported versions, the settings lakecdc reads and sets, the optional engines
it looks for, the JVM packages and class archive of its embedded session, and that session."""
