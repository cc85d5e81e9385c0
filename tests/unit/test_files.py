def test_write_atomic_fsyncs_the_file_and_its_folder_unless_told_it_need_not_be_durable(
    tmp_path, monkeypatch
):
    import os

    from planner._store import files

    synced = []
    real = os.fsync
    monkeypatch.setattr(files.os, "fsync", lambda fd: synced.append(fd) or real(fd))
    files.write_atomic(tmp_path / "a.json", "{}")
    assert len(synced) == 2 and (tmp_path / "a.json").read_text() == "{}"
    synced.clear()
    files.write_atomic(tmp_path / "a.json", "[]", durable=False)
    assert synced == [] and (tmp_path / "a.json").read_text() == "[]"
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"], "no temporary file is left"
