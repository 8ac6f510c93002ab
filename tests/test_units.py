import pytest

from fslab.core.units import format_size, parse_duration, parse_size


@pytest.mark.parametrize(
    "text, expected",
    [
        ("4GiB", 4 * 2**30),
        ("4G", 4 * 2**30),
        ("4g", 4 * 2**30),
        ("10GB", 10 * 10**9),
        ("512MiB", 512 * 2**20),
        ("4k", 4096),
        ("1234", 1234),
        ("1.5GiB", 3 * 2**29),
    ],
)
def test_sizes_binary_unless_written_in_decimal(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    "text, expected", [("30s", 30.0), ("500ms", 0.5), ("2m", 120.0), ("1h", 3600.0), ("7", 7.0), (3, 3.0)]
)
def test_durations_in_seconds(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("bad", ["four gigs", "4XB", "", "-1G"])
def test_bad_sizes_say_what_is_expected(bad):
    with pytest.raises(ValueError, match="not a size.*512MiB"):
        parse_size(bad)


def test_bad_duration_says_what_is_expected():
    with pytest.raises(ValueError, match="not a duration.*30s"):
        parse_duration("soon")


def test_format_size():
    assert format_size(4 * 2**30) == "4GiB"
    assert format_size(3 * 2**29) == "1.5GiB"
    assert format_size(100) == "100B"
