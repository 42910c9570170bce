-- one row per (release, protein): the sha256 of the protein's sequence as of the release
insert into stg_sequences (release_id, protein, sequence_sha256)
values (:release_id, :protein, :sequence_sha256)
