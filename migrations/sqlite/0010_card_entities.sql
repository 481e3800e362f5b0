-- A streaming answer's card may be a CardKit card entity: its id is kept with the turn,
-- so that after a restart the card can still be finished (with a sequence counted from
-- the turn's start, above every operation sent before).
ALTER TABLE turns ADD COLUMN card_id TEXT;
