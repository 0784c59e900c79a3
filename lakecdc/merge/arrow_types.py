"""Spark <-> Arrow types for the columns lakecdc writes (both directions, explicitly; nested types
for its own state tables, such as held canonical events with their maps and arrays)."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import types as T


def to_arrow_type(dtype: T.DataType) -> pa.DataType:
    if isinstance(dtype, T.StringType):
        return pa.string()
    if isinstance(dtype, T.LongType):
        return pa.int64()
    if isinstance(dtype, T.IntegerType):
        return pa.int32()
    if isinstance(dtype, T.ShortType):
        return pa.int16()
    if isinstance(dtype, T.ByteType):
        return pa.int8()
    if isinstance(dtype, T.BooleanType):
        return pa.bool_()
    if isinstance(dtype, T.DoubleType):
        return pa.float64()
    if isinstance(dtype, T.FloatType):
        return pa.float32()
    if isinstance(dtype, T.DecimalType):
        return pa.decimal128(dtype.precision, dtype.scale)
    if isinstance(dtype, T.TimestampType):
        return pa.timestamp("us", tz="UTC")
    if isinstance(dtype, T.TimestampNTZType):
        return pa.timestamp("us")
    if isinstance(dtype, T.DateType):
        return pa.date32()
    if isinstance(dtype, T.BinaryType):
        return pa.binary()
    if isinstance(dtype, T.ArrayType):
        return pa.list_(to_arrow_type(dtype.elementType))
    if isinstance(dtype, T.MapType):
        return pa.map_(to_arrow_type(dtype.keyType), to_arrow_type(dtype.valueType))
    if isinstance(dtype, T.StructType):
        return pa.struct([pa.field(f.name, to_arrow_type(f.dataType)) for f in dtype.fields])
    raise TypeError(f"lakecdc cannot store Spark type {dtype.simpleString()} in Delta yet")


def to_arrow_schema(schema: T.StructType) -> pa.Schema:
    return pa.schema([pa.field(f.name, to_arrow_type(f.dataType), nullable=True) for f in schema.fields])


def to_spark_type(atype: pa.DataType) -> T.DataType:
    if pa.types.is_string(atype) or pa.types.is_large_string(atype) or pa.types.is_string_view(atype):
        return T.StringType()
    if pa.types.is_int64(atype):
        return T.LongType()
    if pa.types.is_int32(atype):
        return T.IntegerType()
    if pa.types.is_int16(atype):
        return T.ShortType()
    if pa.types.is_int8(atype):
        return T.ByteType()
    if pa.types.is_boolean(atype):
        return T.BooleanType()
    if pa.types.is_float64(atype):
        return T.DoubleType()
    if pa.types.is_float32(atype):
        return T.FloatType()
    if pa.types.is_decimal(atype):
        return T.DecimalType(atype.precision, atype.scale)
    if pa.types.is_timestamp(atype):
        return T.TimestampType() if atype.tz else T.TimestampNTZType()
    if pa.types.is_date(atype):
        return T.DateType()
    if pa.types.is_binary(atype) or pa.types.is_large_binary(atype):
        return T.BinaryType()
    if pa.types.is_list(atype) or pa.types.is_large_list(atype):
        return T.ArrayType(to_spark_type(atype.value_type))
    if pa.types.is_map(atype):
        return T.MapType(to_spark_type(atype.key_type), to_spark_type(atype.item_type))
    if pa.types.is_struct(atype):
        return T.StructType([T.StructField(f.name, to_spark_type(f.type)) for f in atype])
    raise TypeError(f"lakecdc cannot read Delta column type {atype} yet")


def to_spark_schema(schema: pa.Schema) -> T.StructType:
    return T.StructType([T.StructField(f.name, to_spark_type(f.type), True) for f in schema])
