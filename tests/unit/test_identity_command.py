"""Which script a `command:` trainable's code identity digests (pure: files only, no git)."""

from planner._store.identity import command_script


def test_the_script_is_the_first_word_that_is_a_file_in_the_contract_folder(tmp_path):
    (tmp_path / "train.py").write_text("")
    (tmp_path / "run.sh").write_text("")
    assert command_script("python train.py --epochs 3", tmp_path) == (tmp_path / "train.py").resolve()
    assert command_script("./run.sh train.py", tmp_path) == (tmp_path / "run.sh").resolve()
    assert command_script("bash -c 'python x.py'", tmp_path) is None
    assert command_script("python missing.py", tmp_path) is None
    assert command_script("python 'unbalanced", tmp_path) is None
