"""Oracle GoldenGate for Big Data's formats: JSON (op- and row-modeled), delimited text, XML and
Avro (row and op), and the replicat's properties files that configure them."""
