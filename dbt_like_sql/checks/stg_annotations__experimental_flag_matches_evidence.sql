-- one row per staged annotation of the release whose is_experimental flag contradicts its evidence code
with staged as (
    select
        sa.release_id,
        sa.protein,
        sa.term,
        sa.evidence,
        sa.is_experimental
    from stg_annotations as sa
    where sa.release_id = :release_id
),

-- the experimental codes of docs/PROTOCOL.md
final as (
    select
        s.release_id,
        s.protein,
        s.term,
        s.evidence,
        s.is_experimental
    from staged as s
    where (
        s.is_experimental
        and s.evidence not in (
            'EXP', 'IDA', 'IPI', 'IMP', 'IGI', 'IEP', 'TAS', 'IC',
            'HTP', 'HDA', 'HMP', 'HGI', 'HEP'
        )
    )
    or (
        not s.is_experimental
        and s.evidence in (
            'EXP', 'IDA', 'IPI', 'IMP', 'IGI', 'IEP', 'TAS', 'IC',
            'HTP', 'HDA', 'HMP', 'HGI', 'HEP'
        )
    )
)

select * from final
