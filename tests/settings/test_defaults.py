from holdfast.settings import Settings


def test_defaults_round_trip_through_json():
    s = Settings()
    assert Settings.from_json(s.to_json()) == s


def test_selector_splits_into_key_and_value():
    s = Settings.from_mapping({"selector": "team:holdfast=yes=really"})
    assert (s.selector_key, s.selector_value) == ("team:holdfast", "yes=really")


def test_known_regions_are_botocores_for_the_partitions_holdfast_deploys_to():
    """settings.py is pure, so it holds the region table itself; botocore's endpoint data
    (pinned with boto3) is the reference it must equal."""
    import botocore.session

    from holdfast.settings import PARTITION_REGIONS

    endpoints = botocore.session.get_session().get_component("data_loader").load_data("endpoints")
    botocore_regions = {p["partition"]: set(p["regions"]) for p in endpoints["partitions"]}
    for partition, regions in PARTITION_REGIONS.items():
        assert set(regions) == botocore_regions[partition], partition
