"""Sync windows (gitsync.model.window): the text of a window, cron matching, DST, the
verdict for one MyApp, when it holds until, and when the next pass is due.

Every expected instant is worked out by hand (the DST switches of 2027: Europe/Berlin
springs forward 2027-03-28 01:00Z, falls back 2027-10-31 01:00Z; America/New_York springs
forward 2027-03-14 07:00Z, falls back 2027-11-07 06:00Z); the property tests compare with
a minute-by-minute oracle of their own.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitsync.errors import ConfigError
from gitsync.model import window as wl
from gitsync.model.window import Verdict, Window, next_change, parse, parse_all, verdict

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def at(text: str) -> datetime:
    """An instant in UTC: ``2027-03-28T01:00`` (seconds optional)."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def change(text: str, now: str) -> datetime | None:
    return next_change([parse(text)], at(now))


def held(windows: list[Window], now: str, ns: str = "shop", **labels: str) -> Verdict:
    return verdict(windows, ns, labels, at(now))


# the text of a window


def test_a_window_parses_into_its_parts_and_is_named_by_its_text() -> None:
    w = parse("  deny 0 22 * * 1-5 8h Europe/Berlin ")
    assert w.kind == "deny"
    assert (w.cron.minutes, w.cron.hours) == ((0,), (22,))
    assert w.cron.days == frozenset(range(1, 32))
    assert w.cron.months == frozenset(range(1, 13))
    assert w.cron.weekdays == {1, 2, 3, 4, 5}
    assert (w.cron.any_day, w.cron.any_weekday) == (True, False)
    assert w.duration == timedelta(hours=8)
    assert w.zone is BERLIN
    assert w.name == "deny 0 22 * * 1-5 8h"
    assert (w.namespaces, w.selector) == (frozenset(), ())
    assert w.text == "deny 0 22 * * 1-5 8h Europe/Berlin"


def test_the_zone_defaults_to_utc_and_options_follow_it() -> None:
    w = parse("ALLOW 0 9 * * mon-fri 8h name=office namespaces=shop,web selector=tier=web")
    assert (w.kind, w.zone, w.name) == ("allow", ZoneInfo("UTC"), "office")
    assert w.namespaces == {"shop", "web"}
    assert w.selector == (wl.Requirement("tier", "in", frozenset({"web"})),)
    w = parse("allow\t0 9 * * * 1h\tUTC name=n")
    assert (w.zone, w.name) == (ZoneInfo("UTC"), "n")


def test_the_selector_takes_the_rest_of_the_text() -> None:
    w = parse("deny 0 0 * * * 1h selector=tier=web, env!=dev,team in ( a, b ),!legacy,canary")
    assert w.selector == (
        wl.Requirement("tier", "in", frozenset({"web"})),
        wl.Requirement("env", "notin", frozenset({"dev"})),
        wl.Requirement("team", "in", frozenset({"a", "b"})),
        wl.Requirement("legacy", "absent"),
        wl.Requirement("canary", "exists"),
    )
    w = parse("deny 0 0 * * * 1h selector=example.com/tier==web,x notin (a,),! y")
    assert w.selector == (
        wl.Requirement("example.com/tier", "in", frozenset({"web"})),
        wl.Requirement("x", "notin", frozenset({"a", ""})),
        wl.Requirement("y", "absent"),
    )
    assert parse("deny 0 0 * * * 1h selector=k=").selector == (
        wl.Requirement("k", "in", frozenset({""})),
    )


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1s", 1), ("90m", 5400), ("1h30m", 5400), ("2d", 172800), ("1d2h3m4s", 93784),
     ("31d", 2678400), ("0d0h1m", 60), ("744h", 2678400)],
)  # fmt: skip
def test_a_duration_is_days_hours_minutes_and_seconds_up_to_31_days(
    text: str, seconds: int
) -> None:
    assert parse(f"deny 0 0 * * * {text}").duration == timedelta(seconds=seconds)


def test_a_day_of_month_is_refused_only_when_no_month_named_has_it() -> None:
    assert parse("allow 0 0 31 1,3,5,7,8,10,12 * 1h").cron.days == {31}
    assert parse("allow 0 0 30 4,6,9,11 * 1h").cron.days == {30}
    assert parse("allow 0 0 29 2 * 1h").cron.days == {29}
    for month in ("4", "6", "9", "11"):
        with pytest.raises(ConfigError, match=f"no month of {month} has a day 31"):
            parse(f"allow 0 0 31 {month} * 1h")
    # Vixie's rule: with a weekday given as well, the Fridays of February open it
    assert parse("allow 0 0 31 2 5 1h").cron.weekdays == {5}
    assert parse("allow 0 0 31 2 fri 1h").cron.weekdays == {5}


def test_parse_all_splits_at_semicolons_and_newlines_and_skips_blank_parts() -> None:
    windows = parse_all(["deny 0 22 * * * 8h; allow 0 9 * * * 8h\n\n", "", " ; "])
    assert [w.name for w in windows] == ["deny 0 22 * * * 8h", "allow 0 9 * * * 8h"]
    windows = parse_all(
        ["deny 0 1 * * * 1h name=a\r\ndeny 0 2 * * * 1h name=b", "deny 0 3 * * * 1h"]
    )
    assert [w.name for w in windows] == ["a", "b", "deny 0 3 * * * 1h"]
    assert parse_all([]) == ()


def test_two_windows_of_one_name_are_refused() -> None:
    with pytest.raises(ConfigError, match="two sync windows are named 'a'"):
        parse_all(
            ["deny 0 1 * * * 1h name=x", "deny 0 2 * * * 1h name=a; allow 0 3 * * * 1h name=a"]
        )
    with pytest.raises(ConfigError, match=r"named 'deny 0 1 \* \* \* 1h'"):
        parse_all(["deny 0 1 * * * 1h; deny 0 1 * * * 1h UTC"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("deny 0 22 * * 1-5", "give KIND MIN HOUR DOM MON DOW DURATION, then options"),
        ("deny selector=a 0 22 * * * 8h", "give KIND MIN HOUR DOM MON DOW DURATION"),
        ("block 0 22 * * * 8h", "the kind 'block' is neither allow nor deny"),
        ("deny 60 22 * * * 8h", "minute 60 is out of 0-59"),
        ("deny 0 24 * * * 8h", "hour 24 is out of 0-23"),
        ("deny 0 0 0 * * 8h", "day of month 0 is out of 1-31"),
        ("deny 0 0 32 * * 8h", "day of month 32 is out of 1-31"),
        ("deny 0 0 * 0 * 8h", "month 0 is out of 1-12"),
        ("deny 0 0 * 13 * 8h", "month 13 is out of 1-12"),
        ("deny 0 0 * * 8 8h", "day of week 8 is out of 0-7"),
        ("deny x 0 * * * 8h", "minute 'x' is not a number"),
        ("deny -1 0 * * * 8h", "minute '' is not a number"),
        ("deny 0 0 * foo * 8h", "month 'foo' is not a number"),
        ("deny 0 0 * * mon-xyz 8h", "day of week 'xyz' is not a number"),
        ("deny jan 0 * * * 8h", "minute 'jan' is not a number"),
        ("deny 1,,2 0 * * * 8h", "minute '' is not a number"),
        ("deny 5-2 0 * * * 8h", "minute range '5-2' runs backwards"),
        ("deny 0 0 * * sat-sun 8h", "day of week range 'sat-sun' runs backwards"),
        ("deny 5/10 0 * * * 8h", "minute '5/10': a step needs a range or \\*"),
        ("deny */0 0 * * * 8h", "step 0 is out of 1-59"),
        ("deny 0 */24 * * * 8h", "step 24 is out of 1-23"),
        ("deny */x 0 * * * 8h", "step 'x' is not a number"),
        ("deny 0 0 31 2 * 8h", "no month of 2 has a day 31: it never opens"),
        ("deny 0 0 30,31 feb * 8h", "no month of feb has a day 30,31"),
        ("deny 0 0 * * * 8", "the duration '8' is not like 90m, 1h30m or 1d12h"),
        ("deny 0 0 * * * 1m1h", "the duration '1m1h' is not like"),
        ("deny 0 0 * * * 1H", "the duration '1H' is not like"),
        ("deny 0 0 * * * 9999999999d", "the duration '9999999999d' is not like"),
        ("deny 0 0 * * * 0m", "the duration 0m is not between 1s and 31d"),
        ("deny 0 0 * * * 0d0h0m0s", "the duration 0d0h0m0s is not between"),
        ("deny 0 0 * * * 31d1s", "the duration 31d1s is not between 1s and 31d"),
        ("deny 0 0 * * * 745h", "the duration 745h is not between"),
        ("deny 0 0 * * * 1h Mars/Base", "unknown time zone 'Mars/Base'"),
        ("deny 0 0 * * * 1h Europe", "unknown time zone 'Europe'"),
        ("deny 0 0 * * * 1h ../etc", "unknown time zone '../etc'"),
        ("deny 0 0 * * * 1h UTC foo=bar", "unexpected 'foo=bar': after DURATION come ZONE"),
        ("deny 0 0 * * * 1h name=a UTC", "unexpected 'UTC'.*selector= takes the rest"),
        ("deny 0 0 * * * 1h name=", "unexpected 'name='"),
        ("deny 0 0 * * * 1h name=a name=b", "name= is given twice"),
        ("deny 0 0 * * * 1h namespaces=Shop", "the namespace 'Shop' is not a DNS label"),
        ("deny 0 0 * * * 1h namespaces=a,,b", "the namespace '' is not a DNS label"),
        ("deny 0 0 * * * 1h namespaces=-a", "the namespace '-a' is not a DNS label"),
        ("deny 0 0 * * * 1h selector=", "the selector term '' is not k=v, k!=v, k in"),
        ("deny 0 0 * * * 1h selector=a,team in (x", "the selector term 'team in \\(x'"),
        ("deny 0 0 * * * 1h selector=a in ()", "the selector term 'a in \\(\\)' is not"),
        ("deny 0 0 * * * 1h selector=a in (b c)", "the selector term 'a in \\(b c\\)'"),
        ("deny 0 0 * * * 1h selector=a=-b", "the selector term 'a=-b' is not"),
        (
            "deny 0 0 * * * 1h selector=a b",
            "the selector term 'a b' is not k=v, k!=v, k in \\(a,b\\), k notin \\(a,b\\), k or !k$",
        ),
        (
            "deny 0 0 * * * 1h selector=a=b name=x",
            "the selector term 'a=b name=x' is not .*selector= takes the rest",
        ),
    ],
)
def test_a_bad_window_is_refused_quoting_its_text(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^sync window '{_escaped(text)}': {message}"):
        parse(text)


def _escaped(text: str) -> str:
    return "".join("\\" + c if c in "*()+?.[]\\" else c for c in text)


def test_a_hostile_window_text_is_escaped_in_the_message() -> None:
    with pytest.raises(ConfigError) as e:
        parse("deny\x1b[2J 0 0 * * * 1h")
    assert str(e.value).startswith(r"sync window 'deny\x1b[2J 0 0 * * * 1h': the kind")
    assert "\x1b" not in str(e.value)


# the cron fields


@pytest.mark.parametrize(
    ("fields", "minutes", "hours", "days", "months", "weekdays"),
    [
        ("*/15 */6 * * *", (0, 15, 30, 45), (0, 6, 12, 18), range(1, 32), range(1, 13),
         range(7)),
        ("10-50/20 1,3-4 1-31/10 JAN,jul,12 7", (10, 30, 50), (1, 3, 4), (1, 11, 21, 31),
         (1, 7, 12), (0,)),
        ("59 23 */31 Feb-Apr Mon-Fri", (59,), (23,), (1,), (2, 3, 4), (1, 2, 3, 4, 5)),
        ("0 0 * */5 5-7", (0,), (0,), range(1, 32), (1, 6, 11), (5, 6, 0)),
        ("0 0 * 1-12/12 0-7", (0,), (0,), range(1, 32), (1,), range(7)),
        ("0 0 * dec sun,sat,6", (0,), (0,), range(1, 32), (12,), (0, 6)),
        ("0 0 * * */2", (0,), (0,), range(1, 32), range(1, 13), (0, 2, 4, 6)),
        ("30-30 5-5/1 2-3 4-4 6-6", (30,), (5,), (2, 3), (4,), (6,)),
        ("0-59/59 0-23/23 * * 1-7/3", (0, 59), (0, 23), range(1, 32), range(1, 13), (1, 4, 0)),
    ],
)  # fmt: skip
def test_cron_fields_match_the_values_vixie_cron_gives_them(
    fields: str,
    minutes: tuple[int, ...],
    hours: tuple[int, ...],
    days: range | tuple[int, ...],
    months: range | tuple[int, ...],
    weekdays: range | tuple[int, ...],
) -> None:
    cron = parse(f"allow {fields} 1m").cron
    assert (cron.minutes, cron.hours) == (minutes, hours)
    expected = (frozenset(days), frozenset(months), frozenset(weekdays))
    assert (cron.days, cron.months, cron.weekdays) == expected


def test_a_day_field_that_begins_with_a_star_counts_as_any() -> None:
    cron = parse("allow 0 0 */2 * 5 1m").cron
    assert (cron.any_day, cron.any_weekday) == (True, False)
    cron = parse("allow 0 0 13 * */1 1m").cron
    assert (cron.any_day, cron.any_weekday) == (False, True)
    cron = parse("allow 0 0 1-31 * 0-7 1m").cron
    assert (cron.any_day, cron.any_weekday) == (False, False)


def test_the_last_minute_of_the_hour_and_of_the_year_run_into_the_next() -> None:
    w = "allow 59 23 * * * 2m"
    assert change(w, "2027-12-31T23:58") == at("2027-12-31T23:59")
    assert parse(w).active(at("2028-01-01T00:00:59"))
    assert not parse(w).active(at("2028-01-01T00:01"))
    assert change(w, "2027-12-31T23:59") == at("2028-01-01T00:01")
    assert change("allow 59 * * * * 1m", "2027-06-01T10:59:30") == at("2027-06-01T11:00")
    assert change("allow 59 * * * * 1m", "2027-06-01T11:00") == at("2027-06-01T11:59")


def test_a_day_of_month_is_matched_only_in_months_that_have_it() -> None:
    assert change("allow 0 0 31 * * 1h", "2027-04-01T00:00") == at("2027-05-31T00:00")
    assert change("allow 0 0 31 * * 1h", "2027-05-31T01:00") == at("2027-07-31T00:00")
    assert change("allow 0 0 1 * * 1h", "2027-01-31T12:00") == at("2027-02-01T00:00")


def test_february_29_comes_in_a_leap_year_within_the_horizon_or_not_at_all() -> None:
    w = "allow 0 12 29 2 * 1h"
    assert change(w, "2027-03-01T00:00") == at("2028-02-29T12:00")
    assert change(w, "2028-02-29T12:00") == at("2028-02-29T13:00")
    # the next is in 2032, past the 366 days looked at
    assert change(w, "2028-02-29T13:00") is None


def test_the_horizon_is_366_days_and_includes_its_last_instant() -> None:
    w = "allow 0 0 29 2 * 1h"
    assert change(w, "2027-02-28T00:00") == at("2028-02-29T00:00")
    assert change(w, "2027-02-27T23:59:59") is None
    v = held([parse(w)], "2027-02-28T00:00")
    assert (v.open, v.until) == (False, at("2028-02-29T00:00"))
    assert held([parse(w)], "2027-02-27T23:59:59").until is None


def test_day_of_month_or_weekday_when_both_are_restricted() -> None:
    # every 13th and every Friday: 2027-01-01 and -08 are Fridays, the 13th a Wednesday
    w = "allow 0 0 13 * 5 1h"
    assert parse(w).active(at("2027-01-01T00:30"))
    assert change(w, "2027-01-01T01:00") == at("2027-01-08T00:00")
    assert change(w, "2027-01-08T01:00") == at("2027-01-13T00:00")
    assert change(w, "2027-01-13T01:00") == at("2027-01-15T00:00")
    # with the weekday named by name, or as 7 for Sunday: 2027-01-03 is a Sunday
    assert change("allow 0 0 13 * fri 1h", "2027-01-08T01:00") == at("2027-01-13T00:00")
    assert change("allow 0 0 20 * 7 1h", "2027-01-01T00:00") == at("2027-01-03T00:00")
    assert change("allow 0 0 20 * 0 1h", "2027-01-17T01:00") == at("2027-01-20T00:00")


def test_day_of_month_and_weekday_when_one_begins_with_a_star() -> None:
    # odd days that are Fridays: 2027-01-01 and -15, not -08
    assert change("allow 0 0 */2 * 5 1h", "2027-01-01T01:00") == at("2027-01-15T00:00")
    # the 13th on a Friday: 2027-08-13
    assert change("allow 0 0 13 * */1 1h", "2027-01-01T00:00") == at("2027-01-13T00:00")
    assert change("allow 0 0 13 8 */5 1h", "2027-01-01T00:00") == at("2027-08-13T00:00")
    # only in the months named
    assert change("allow 0 0 * mar * 1h", "2027-01-15T00:00") == at("2027-03-01T00:00")
    assert change("allow 0 0 1 * 1 1h", "2027-01-05T00:00") == at("2027-01-11T00:00")


# DST


def test_a_start_in_the_spring_forward_gap_starts_when_the_gap_ends() -> None:
    w = "allow 30 2 * * * 1h Europe/Berlin"
    assert change(w, "2027-03-27T00:00") == at("2027-03-27T01:30")
    assert change(w, "2027-03-27T23:00") == at("2027-03-28T01:00")
    assert change(w, "2027-03-28T01:00") == at("2027-03-28T02:00")
    assert not parse(w).active(at("2027-03-28T00:59:59"))
    assert parse(w).active(at("2027-03-28T01:00"))
    assert change(w, "2027-03-28T02:00") == at("2027-03-29T00:30")
    w = "allow 30 2 * * * 1h America/New_York"
    assert change(w, "2027-03-13T00:00") == at("2027-03-13T07:30")
    assert change(w, "2027-03-14T06:00") == at("2027-03-14T07:00")
    assert change(w, "2027-03-14T07:00") == at("2027-03-14T08:00")


def test_the_starts_of_a_gap_start_once() -> None:
    w = "allow */15 2 * * * 10m Europe/Berlin"
    assert change(w, "2027-03-28T00:00") == at("2027-03-28T01:00")
    assert change(w, "2027-03-28T01:00") == at("2027-03-28T01:10")
    assert change(w, "2027-03-28T01:10") == at("2027-03-29T00:00")
    # 01:30 before the gap and 02:30 in it: one stretch, 00:30Z to 01:00Z + 1 h
    w = "allow 30 1,2 * * * 1h Europe/Berlin"
    assert change(w, "2027-03-28T00:30") == at("2027-03-28T02:00")
    # 02:00 in the gap and 03:00 after it start at the same instant
    w = "allow 0 2,3 * * * 30m Europe/Berlin"
    assert change(w, "2027-03-28T01:00") == at("2027-03-28T01:30")
    assert change(w, "2027-03-28T01:30") == at("2027-03-29T00:00")


def test_a_start_in_the_fall_back_overlap_starts_at_the_first_of_the_two() -> None:
    w = "deny 30 2 * * * 1h Europe/Berlin"
    assert change(w, "2027-10-31T00:00") == at("2027-10-31T00:30")
    assert change(w, "2027-10-31T00:30") == at("2027-10-31T01:30")
    assert change(w, "2027-10-31T01:30") == at("2027-11-01T01:30")
    assert parse(w).active(at("2027-10-31T01:29:59"))
    assert not parse(w).active(at("2027-10-31T01:30"))
    w = "allow */15 2 * * * 10m Europe/Berlin"
    assert parse(w).active(at("2027-10-31T00:05"))
    assert not parse(w).active(at("2027-10-31T01:05"))
    assert change(w, "2027-10-31T00:50") == at("2027-10-31T00:55")
    assert change(w, "2027-10-31T00:55") == at("2027-11-01T01:00")
    w = "deny 30 1 * * * 1h America/New_York"
    assert change(w, "2027-11-07T05:00") == at("2027-11-07T05:30")
    assert change(w, "2027-11-07T05:30") == at("2027-11-07T06:30")
    assert change(w, "2027-11-07T06:30") == at("2027-11-08T06:30")


@pytest.mark.parametrize(
    ("text", "now", "until"),
    [
        ("deny 0 22 * * * 8h Europe/Berlin", "2027-03-28T00:00", "2027-03-28T07:00:00+02:00"),
        ("deny 0 22 * * * 8h Europe/Berlin", "2027-10-31T00:00", "2027-10-31T05:00:00+01:00"),
        ("deny 0 22 * * * 8h America/New_York", "2027-03-14T06:00", "2027-03-14T07:00:00-04:00"),
        ("deny 0 22 * * * 8h America/New_York", "2027-11-07T06:00", "2027-11-07T05:00:00-05:00"),
        ("deny 0 22 * * * 8h Europe/Berlin", "2027-03-30T00:00", "2027-03-30T06:00:00+02:00"),
    ],
)
def test_an_eight_hour_window_across_a_switch_lasts_eight_real_hours(
    text: str, now: str, until: str
) -> None:
    v = held([parse(text)], now)
    assert (v.open, v.until) == (False, datetime.fromisoformat(until))
    assert v.describe() == f'held by window "{text.removesuffix(text.split()[-1]).strip()}"' + (
        f" until {until}"
    )


# the verdict


def test_no_window_that_applies_leaves_a_myapp_open() -> None:
    assert held([], "2027-01-01T00:00") == Verdict(True, None, None)
    assert Verdict(True).describe() == "open"
    assert Verdict(True, parse("deny 0 0 * * * 1h")).describe() == "open"
    deny = parse("deny * * * * * 1m namespaces=web")
    assert held([deny], "2027-01-01T00:00", ns="shop") == Verdict(True)


def test_a_deny_window_holds_until_its_occurrence_ends() -> None:
    deny = parse("deny 0 22 * * 1-5 8h Europe/Berlin")
    v = held([deny], "2026-12-04T23:00")
    assert v == Verdict(False, deny, at("2026-12-05T05:00"))
    assert v.describe() == 'held by window "deny 0 22 * * 1-5 8h" until 2026-12-05T06:00:00+01:00'
    assert held([deny], "2026-12-05T04:59:59").open is False
    assert held([deny], "2026-12-05T05:00").open is True
    assert held([deny], "2026-12-04T20:59:59").open is True
    assert held([deny], "2026-12-04T21:00").open is False


def test_deny_wins_over_an_active_allow_window() -> None:
    allow, deny = parse("allow 0 0 * * * 1d"), parse("deny 0 12 * * * 1h")
    assert held([allow, deny], "2027-01-01T12:30") == Verdict(False, deny, at("2027-01-01T13:00"))
    assert held([allow, deny], "2027-01-01T13:00") == Verdict(True)


def test_an_allow_window_closes_a_myapp_outside_it() -> None:
    allow = parse("allow 0 9 * * 1-5 8h name=office")
    v = held([allow], "2026-12-05T12:00")
    assert v == Verdict(False, allow, at("2026-12-07T09:00"))
    assert v.describe() == 'held outside allow window "office" until 2026-12-07T09:00:00+00:00'
    assert held([allow], "2026-12-07T09:00") == Verdict(True)
    assert held([allow], "2026-12-07T16:59:59") == Verdict(True)
    assert held([allow], "2026-12-07T17:00").until == at("2026-12-08T09:00")


def test_the_allow_window_that_opens_first_holds_and_one_that_is_open_opens() -> None:
    late, early = parse("allow 0 20 * * * 1h"), parse("allow 0 10 * * * 1h")
    assert held([late, early], "2027-01-01T09:00") == Verdict(False, early, at("2027-01-01T10:00"))
    assert held([late, early], "2027-01-01T12:00") == Verdict(False, late, at("2027-01-01T20:00"))
    assert held([late, early], "2027-01-01T10:30").open
    assert held([early, late], "2027-01-01T20:30").open
    never = parse("allow 0 0 29 2 * 1h name=leap")
    assert held([never, late], "2028-03-01T00:00").window == late
    assert held([late, never], "2028-03-01T21:00").window == late
    v = held([never], "2028-03-01T00:00")
    assert v == Verdict(False, never, None)
    assert v.describe() == 'held outside allow window "leap" until further notice'


def test_a_deny_window_holds_as_long_as_a_deny_window_follows_it() -> None:
    night, morning = parse("deny 0 22 * * * 8h"), parse("deny 0 5 * * * 3h")
    assert held([night, morning], "2027-01-01T23:00") == Verdict(
        False, night, at("2027-01-02T08:00")
    )
    assert held([morning, night], "2027-01-02T05:30").window == morning
    # one that is not active does not cut the other short
    noon = parse("deny 0 12 * * * 1h")
    assert held([noon, night], "2027-01-01T23:00").until == at("2027-01-02T06:00")
    assert held([night, noon], "2027-01-01T23:00").until == at("2027-01-02T06:00")
    # nor does an earlier stretch of the same day
    twice = parse("deny 0 1,22 * * * 2h")
    assert held([twice], "2027-01-01T23:00").until == at("2027-01-02T00:00")
    assert held([twice], "2027-01-01T01:00").until == at("2027-01-01T03:00")


def test_a_deny_window_then_an_allow_only_gap_holds_until_the_allow_window_opens() -> None:
    deny, allow = parse("deny 0 22 * * * 8h"), parse("allow 0 9 * * * 8h")
    assert held([deny, allow], "2027-01-01T23:00") == Verdict(False, deny, at("2027-01-02T09:00"))
    # and an allow window that opens inside a deny window opens when that one ends
    allow = parse("allow 0 4 * * * 8h")
    assert held([deny, allow], "2027-01-01T23:00").until == at("2027-01-02T06:00")
    deny2 = parse("deny 0 9 * * * 1h")
    assert held([deny, allow, deny2], "2027-01-01T23:00").until == at("2027-01-02T06:00")
    allow = parse("allow 30 8 * * * 1h")
    assert held([deny, allow, deny2], "2027-01-01T23:00").until == at("2027-01-02T08:30")
    # an allow window only ever open inside a deny window: never
    allow = parse("allow 30 9 * * * 20m")
    assert held([deny, allow, deny2], "2027-01-01T23:00").until is None


def test_a_deny_window_that_never_ends_holds_until_further_notice() -> None:
    always = parse("deny 0 * * * * 1h name=freeze")
    v = held([always], "2027-01-01T00:00")
    assert v == Verdict(False, always, None)
    assert v.describe() == 'held by window "freeze" until further notice'
    assert next_change([always], at("2027-01-01T00:00")) is None
    long = parse("deny 0 0 1 * * 31d")
    assert held([long], "2027-01-01T00:00").until is None
    assert next_change([long], at("2027-01-01T00:00")) is None


def test_a_deny_window_that_does_not_come_again_within_the_horizon_still_ends() -> None:
    leap = parse("deny 0 0 29 2 * 1h")
    assert held([leap], "2028-02-29T00:30").until == at("2028-02-29T01:00")
    assert next_change([leap], at("2028-02-29T00:30")) == at("2028-02-29T01:00")


def test_a_deny_window_ends_within_the_horizon_or_not_at_all() -> None:
    # every day from 2027-01-01, 24 h each: one stretch to 2027-12-31T00:00 + 1 d
    year = parse("deny 0 0 * 1-11 * 1d")
    assert held([year], "2027-01-01T00:00").until == at("2027-12-01T00:00")
    assert next_change([year], at("2027-01-01T00:00")) == at("2027-12-01T00:00")
    assert held([year], "2026-11-30T23:59:59").until == at("2026-12-01T00:00")
    assert held([year], "2026-12-01T00:00").open
    assert next_change([year], at("2026-12-01T00:00")) == at("2027-01-01T00:00")


def test_namespaces_and_a_selector_narrow_a_window() -> None:
    deny = parse("deny 0 0 1 1 * 1h namespaces=shop,web selector=tier=web,env!=dev,team in (a,b),"
                 "!legacy,canary")  # fmt: skip
    ok = {"tier": "web", "team": "a", "canary": ""}
    assert not held([deny], "2027-01-01T00:00", **ok).open
    assert not held([deny], "2027-01-01T00:00", ns="web", **ok, env="prod").open
    assert held([deny], "2027-01-01T00:00", ns="db", **ok).open
    for other in (
        {"tier": "db"},
        {"tier": ""},
        {"env": "dev"},
        {"team": "c"},
        {"legacy": "yes"},
        {"legacy": ""},
    ):
        assert held([deny], "2027-01-01T00:00", **{**ok, **other}).open, other
    for gone in ("tier", "team", "canary"):
        labels = {k: v for k, v in ok.items() if k != gone}
        assert held([deny], "2027-01-01T00:00", **labels).open, gone


def test_a_notin_term_matches_a_myapp_without_the_label() -> None:
    w = parse("deny * * * * * 1m selector=env notin (dev,test),x!=y")
    assert w.applies("shop", {}) and w.applies("shop", {"env": "prod", "x": "z"})
    assert not w.applies("shop", {"env": "test"}) and not w.applies("shop", {"x": "y"})
    assert parse("deny * * * * * 1m namespaces=shop").applies("shop", {"a": "b"})


def test_a_narrowed_allow_window_does_not_close_other_myapps() -> None:
    allow = parse("allow 0 9 * * * 1h namespaces=shop")
    assert held([allow], "2027-01-01T12:00", ns="web") == Verdict(True)
    assert not held([allow], "2027-01-01T12:00", ns="shop").open


# the next pass


def test_next_change_is_the_moment_a_window_opens_for_a_catch_up_pass() -> None:
    w = "allow 0 9 * * 1-5 8h"
    assert change(w, "2026-12-07T08:59:59") == at("2026-12-07T09:00")
    assert change(w, "2026-12-07T09:00") == at("2026-12-07T17:00")
    assert change(w, "2026-12-07T16:59:59") == at("2026-12-07T17:00")
    assert change(w, "2026-12-04T17:00") == at("2026-12-07T09:00")
    assert held([parse(w)], "2026-12-07T08:59:59").until == at("2026-12-07T09:00")


def test_next_change_is_the_first_of_any_window_whether_it_applies_or_not() -> None:
    windows = [parse("deny 0 22 * * * 8h namespaces=a"), parse("allow 30 6 * * * 1h")]
    assert next_change(windows, at("2027-01-01T21:00")) == at("2027-01-01T22:00")
    assert next_change(windows, at("2027-01-01T23:00")) == at("2027-01-02T06:00")
    assert next_change(windows[::-1], at("2027-01-02T06:00")) == at("2027-01-02T06:30")
    assert next_change([], at("2027-01-01T00:00")) is None


def test_overlapping_occurrences_of_a_window_are_one_stretch() -> None:
    w = "deny 0 0-3 * * * 90m"
    assert change(w, "2027-01-01T00:00") == at("2027-01-01T04:30")
    w = "deny 0 0,1 * * * 1h"
    assert change(w, "2027-01-01T00:00") == at("2027-01-01T02:00")
    assert change("deny * 9 * * * 1m", "2027-01-01T09:00") == at("2027-01-01T10:00")
    w = "deny 0 23 * * * 1h"
    assert change(w, "2027-01-01T23:00") == at("2027-01-02T00:00")
    # across midnight: the stretch of 23:00 runs into the next day's first
    assert change("deny 0 0,23 * * * 1h", "2027-01-01T23:00") == at("2027-01-02T01:00")


def test_a_stretch_or_a_start_at_the_limit_counts_and_one_past_it_does_not() -> None:
    w = parse("deny 0 0,1 * * * 1h")
    start = at("2027-01-01T00:30")
    assert wl._inactive_from(w, start, at("2027-01-01T02:00")) == at("2027-01-01T02:00")
    assert wl._inactive_from(w, start, at("2027-01-01T01:59:59")) == wl.NEVER
    # a stretch that reaches the limit and goes on past it
    assert wl._inactive_from(w, start, at("2027-01-01T01:00")) == wl.NEVER
    assert wl._inactive_from(w, at("2027-01-01T02:00"), start) == at("2027-01-01T02:00")
    after = at("2027-01-01T02:00")
    assert wl._next_start(w, after, at("2027-01-02T00:00")) == at("2027-01-02T00:00")
    assert wl._next_start(w, after, at("2027-01-01T23:59:59")) == wl.NEVER
    assert wl._next_start(w, at("2027-01-01T02:00"), at("2027-01-01T12:00")) == wl.NEVER
    # strictly after: a start at ``at`` is not the next one
    noon = at("2027-01-01T12:00")
    assert wl._next_start(w, at("2027-01-01T00:00"), noon) == at("2027-01-01T01:00")


def test_an_instant_without_a_zone_is_refused() -> None:
    with pytest.raises(ValueError, match="has no time zone"):
        verdict([], "shop", {}, datetime(2027, 1, 1))
    with pytest.raises(ValueError, match="2027-01-01T00:00:00 has no time zone"):
        next_change([], datetime(2027, 1, 1))


def test_any_zone_of_the_instant_gives_the_same_answer() -> None:
    w = parse("deny 0 22 * * * 8h Europe/Berlin")
    now = datetime(2027, 3, 28, 0, 0, tzinfo=NEW_YORK)  # 04:00Z
    assert verdict([w], "shop", {}, now).until == at("2027-03-28T05:00")
    assert next_change([w], now) == at("2027-03-28T05:00")


# properties, against an oracle that looks at every minute

ZONES = ("UTC", "Europe/Berlin", "America/New_York")
SWITCHES = tuple(
    at(t)
    for t in (
        "2027-03-28T01:00", "2027-10-31T01:00", "2027-03-14T07:00", "2027-11-07T06:00",
        "2027-06-15T12:00", "2027-12-31T23:00",
    )
)  # fmt: skip


@st.composite
def windows(draw: st.DrawFn) -> tuple[str, set[int], set[int], set[int] | None, int, str]:
    """A window's text, with its minutes, hours, weekdays (None: any) and duration."""
    minutes = draw(st.sets(st.sampled_from([0, 1, 15, 30, 45, 59]), min_size=1, max_size=3))
    hours = draw(st.sets(st.integers(0, 23), min_size=1, max_size=3))
    weekdays = draw(st.none() | st.sets(st.integers(0, 6), min_size=1, max_size=6))
    # at most three starts a day of at most 4 h each: a window is never active for good
    duration = draw(st.integers(1, 4 * 60))
    zone = draw(st.sampled_from(ZONES))
    kind = draw(st.sampled_from(["allow", "deny"]))
    dow = "*" if weekdays is None else ",".join(map(str, sorted(weekdays)))
    hm = ",".join(map(str, sorted(minutes))) + " " + ",".join(map(str, sorted(hours)))
    text = f"{kind} {hm} * * {dow} {duration}m {zone}"
    return text, minutes, hours, weekdays, duration, zone


def _starts_at(u: datetime, minutes: set[int], hours: set[int], weekdays: set[int] | None,
               zone: ZoneInfo) -> bool:  # fmt: skip
    """Whether an occurrence starts at instant ``u`` (on a minute), by the rules as read."""
    local = u.astimezone(zone)
    walls = [] if local.fold else [local.replace(tzinfo=None)]
    before = (u - timedelta(seconds=1)).astimezone(zone)
    if local.utcoffset() > before.utcoffset():  # type: ignore[operator]
        # a gap just ended: its wall times start here
        wall = before.replace(tzinfo=None) + timedelta(seconds=1)
        while wall < local.replace(tzinfo=None):
            walls.append(wall)
            wall += timedelta(minutes=1)
    return any(
        w.minute in minutes
        and w.hour in hours
        and (weekdays is None or w.isoweekday() % 7 in weekdays)
        for w in walls
    )


def _oracle(spec: tuple[str, set[int], set[int], set[int] | None, int, str], t: datetime) -> bool:
    _, minutes, hours, weekdays, duration, zone = spec
    u = t.replace(second=0, microsecond=0)
    while u > t - timedelta(minutes=duration):
        if _starts_at(u, minutes, hours, weekdays, ZoneInfo(zone)):
            return True
        u -= timedelta(minutes=1)
    return False


instants = st.builds(
    lambda base, seconds: base + timedelta(seconds=seconds),
    st.sampled_from(SWITCHES),
    st.integers(-36 * 3600, 36 * 3600),
)
PROPERTY = settings(max_examples=60, deadline=None, derandomize=True, database=None)


@PROPERTY
@given(windows(), instants)
def test_a_window_is_active_when_the_oracle_says(
    spec: tuple[str, set[int], set[int], set[int] | None, int, str], t: datetime
) -> None:
    assert parse(spec[0]).active(t) == _oracle(spec, t)


@PROPERTY
@given(st.lists(windows(), min_size=1, max_size=3), instants)
def test_the_verdict_holds_until_the_next_change_and_opens_at_until(
    specs: list[tuple[str, set[int], set[int], set[int] | None, int, str]], now: datetime
) -> None:
    ws = [parse(s[0] + f" name=w{i}") for i, s in enumerate(specs)]
    first = verdict(ws, "shop", {}, now)
    changed = next_change(ws, now)
    assert changed is not None and changed > now
    for t in (now + (changed - now) / 2, changed - timedelta(seconds=1)):
        assert verdict(ws, "shop", {}, t).open == first.open
    assert [w.active(changed) for w in ws] != [w.active(now) for w in ws]
    if not first.open and first.until is not None:
        assert first.until > now
        assert verdict(ws, "shop", {}, first.until).open
        assert not verdict(ws, "shop", {}, first.until - timedelta(seconds=1)).open
        assert [_oracle(s, first.until) for s in specs] == [w.active(first.until) for w in ws]


def test_closed_for_names_the_window_and_an_open_one_closes_nothing() -> None:
    """The gate's view: a MyApp body (its namespace and labels), a Wait when closed."""
    night = wl.parse_all(["deny 0 22 * * * 8h Europe/Berlin name=night namespaces=shop"])
    at_night = datetime(2027, 1, 4, 3, 0, tzinfo=UTC)
    morning = at_night + timedelta(hours=4)
    shop = {"metadata": {"namespace": "shop", "name": "web"}}
    wait = wl.closed_for(night, shop, at_night)
    assert wait is not None
    assert (wait.reason, wait.on, wait.hold) == ("SyncWindow", "night", "window")
    assert wait.message == 'held by window "night" until 2027-01-04T06:00:00+01:00'
    assert wl.closed_for(night, shop, morning) is None
    # another namespace, or none at all: the window does not apply
    assert wl.closed_for(night, {"metadata": {"namespace": "prod"}}, at_night) is None
    assert wl.closed_for(night, {"metadata": {}}, at_night) is None
    gate = wl.Windows(night)
    assert gate.closed(shop, None, morning) is None
    assert wl.Windows().closed(shop, None, at_night) is None
    closed = gate.closed(shop, shop, at_night)
    assert closed == wl.Closed(wait, "", False)
    assert wl.Windows(night, block_corrections=True).closed(shop, shop, at_night) == (
        wl.Closed(wait, "", True)
    )
    annotated = {"metadata": {**shop["metadata"], "annotations": {wl.OVERRIDE_ANNOTATION: "INC-9"}}}
    # an override lets changes through, and so corrections are not held either
    assert wl.Windows(night, block_corrections=True).closed(shop, annotated, at_night) == (
        wl.Closed(wait, "INC-9", False)
    )
    assert wl.Windows(night, ignore=True).closed(shop, shop, at_night) == wl.Closed(
        wait, wl.IGNORE_FLAG, False
    )
    assert wl.override_of(None) == "" and wl.override_of(shop) == ""
    empty = {"metadata": {"annotations": {wl.OVERRIDE_ANNOTATION: ""}}}
    assert wl.override_of(empty) == ""
