-- one row per (release, term, ancestor): is_a/part_of closure inside one aspect, term = ancestor included
insert into stg_term_closure (release_id, term, ancestor, aspect)
values (:release_id, :term, :ancestor, :aspect)
