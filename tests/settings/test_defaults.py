from holdfast.settings import Settings


def test_defaults_round_trip_through_json():
    s = Settings()
    assert Settings.from_json(s.to_json()) == s


def test_selector_splits_into_key_and_value():
    s = Settings.from_mapping({"selector": "team:holdfast=yes=really"})
    assert (s.selector_key, s.selector_value) == ("team:holdfast", "yes=really")
