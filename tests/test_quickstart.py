from tnmt.config import TrainConfig
from tnmt.quickstart import budget, numbers_task


def test_numbers_task_holds_out_its_test_and_validation_numbers(tmp_path):
    recipe, test_src, test_tgt = numbers_task(tmp_path)
    lines = {name: (tmp_path / name).read_text().splitlines() for name in ("train.en", "valid.en", "test.en")}
    assert len(lines["test.en"]) == len(lines["valid.en"]) == 1000 and len(lines["train.en"]) > 15_000
    assert not set(lines["test.en"]) & set(lines["train.en"])
    assert not set(lines["valid.en"]) & set(lines["train.en"])
    assert "forty-two" in lines["train.en"] + lines["valid.en"] + lines["test.en"]  # every number < 1000
    assert len((tmp_path / "test.it").read_text().splitlines()) == 1000 and test_src == tmp_path / "test.en"
    assert test_tgt == tmp_path / "test.it" and recipe.data.train_src == str(tmp_path / "train.en")
    assert recipe.data.valid_tgt == str(tmp_path / "valid.it") and recipe.train.best_metric == "chrf"


def test_budget_is_said_in_words():
    assert budget(TrainConfig(max_steps=600)) == "up to 600 updates"
    assert budget(TrainConfig(max_steps=0, max_minutes=10.0)) == "up to 10 minutes"
    assert budget(TrainConfig(max_steps=50, max_minutes=2.5)) == "up to 2.5 minutes or 50 updates"
