ALTER TABLE campaign_quiz DROP COLUMN choices;
