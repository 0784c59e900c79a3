"""A batch whose net actions outgrow ``spark.driver.maxResultSize`` (delta-rs collects them on the
driver) fails with what to do, not with Spark's stage failure alone; other errors pass as they are."""

from __future__ import annotations

import pytest

from lakecdc.errors import LakecdcError
from lakecdc.merge.prepare import _result_size_advice
from lakecdc.spark.session import LOCAL_CONF


def test_a_result_larger_than_the_drivers_limit_says_what_to_do() -> None:
    spark_says = ("Job aborted due to stage failure: Total size of serialized results of 7 tasks (1037.3 MiB) "
                  "is bigger than spark.driver.maxResultSize (1024.0 MiB)")
    expected = "raise spark.driver.maxResultSize.*engine='delta-spark'"
    with pytest.raises(LakecdcError, match=expected) as caught, _result_size_advice():
        raise RuntimeError(spark_says)
    assert spark_says in str(caught.value.__cause__)
    with pytest.raises(ValueError, match="something else"), _result_size_advice():
        raise ValueError("something else")


def test_the_embedded_session_collects_up_to_half_its_driver_memory() -> None:
    # 20,000,000 events over 5,000,000 keys: 9,000,000 net actions, about 1 GiB as Arrow
    assert LOCAL_CONF["spark.driver.maxResultSize"] == "4g" and LOCAL_CONF["spark.driver.memory"] == "8g"
