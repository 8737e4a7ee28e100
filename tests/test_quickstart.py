from tnmt.quickstart import write_numbers_task


def test_numbers_task_holds_out_its_test_and_validation_numbers(tmp_path):
    test_src, test_tgt, overrides = write_numbers_task(tmp_path)
    lines = {name: (tmp_path / name).read_text().splitlines() for name in ("train.en", "valid.en", "test.en")}
    assert len(lines["test.en"]) == len(lines["valid.en"]) == 1000 and len(lines["train.en"]) > 15_000
    assert not set(lines["test.en"]) & set(lines["train.en"])
    assert not set(lines["valid.en"]) & set(lines["train.en"])
    assert "forty-two" in lines["train.en"] + lines["valid.en"] + lines["test.en"]  # every number < 1000
    assert len((tmp_path / "test.it").read_text().splitlines()) == 1000 and test_src == tmp_path / "test.en"
    assert test_tgt == tmp_path / "test.it" and f"--data.train_src={tmp_path / 'train.en'}" in overrides
